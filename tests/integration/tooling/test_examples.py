"""The examples and the demo run and print real results."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kinesis_spout.testing.spark import quick_start_env

ROOT = Path(__file__).resolve().parents[3]


def this_checkout(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout's package first on the path (an example runs from its own folder, where the
    installed package would be imported otherwise)."""
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))}


def no_aws_credentials_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a machine with no AWS credentials at all (no variables, no ~/.aws, no instance role)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KINESIS_SPOUT_", "AWS_"))}
    return this_checkout({**env, "HOME": str(tmp_path), "AWS_EC2_METADATA_DISABLED": "true", **extra})


def test_spout_wordcount_example_counts_words_and_never_a_failed_record(kinesalite, zookeeper) -> None:
    """The poison sentence fails on each of its 4 attempts and is dead-lettered; none of its words is counted
    (counting before failing counted them once per attempt)."""
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, ["the cow jumped over the moon"] * 30 + ["four score and seven years ago"] * 10
                   + ["this poison sentence always fails", "   "])
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "spout_wordcount.py"), "--stream", stream, "--zookeeper",
         zookeeper.hosts, "--endpoint-url", kinesalite.endpoint_url, "--seconds", "4", "--top", "100"],
        capture_output=True, text=True, timeout=60, env=this_checkout({**os.environ, "AWS_ACCESS_KEY_ID": "test",
                                                                       "AWS_SECRET_ACCESS_KEY": "test"}))
    assert out.returncode == 0, out.stderr
    # logging is configured: the spout says what it opened, and sums its dead letters up in one line
    opened = f"INFO kinesis_spout.spout.opening: spout wordcount-example opened stream {stream!r}"
    assert opened in out.stderr, out.stderr
    summaries = re.findall(r"WARNING kinesis_spout\.deadletters\.worker: (\d+) dead letters? written to the "
                           r"dead-letter handler", out.stderr)
    assert sum(map(int, summaries)) == 2, out.stderr
    assert "INFO kinesis_spout.kazoo" not in out.stderr, out.stderr
    lines = out.stdout.splitlines()
    assert sum(line.startswith("dead letter ") for line in lines) == 2, out.stdout
    assert "dead-lettered: 2" in lines
    counts = {word: int(n) for word, n in (line.split() for line in lines if not line.startswith("dead"))}
    assert counts == {"the": 60, "cow": 30, "jumped": 30, "over": 30, "moon": 30, "four": 10, "score": 10,
                      "and": 10, "seven": 10, "years": 10, "ago": 10}


def test_lease_worker_example_splits_the_shards_between_two_workers_and_reads_everything() -> None:
    """examples/lease_worker.py --demo: two worker processes share a 4-shard stream through leases; a takes every
    lease, gives two back when b joins, b reads what is put after a stopped, and every record produced is read by
    one of them. The demo waits for each step, not for a time: a loaded machine only makes it longer (the timeout
    bounds a hang)."""
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "lease_worker.py"), "--demo", "--seconds", "2"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env=this_checkout({k: v for k, v in os.environ.items() if not k.startswith("KINESIS_SPOUT_")}))
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    summary = [line for line in out.stdout.splitlines() if line.startswith("[lease-demo] ")]
    assert summary and summary[0].endswith("every record read"), out.stdout
    for name in ("a", "b"):
        read = re.search(rf"^\[worker {name}\] read (\d+) records", out.stdout, re.MULTILINE)
        assert read and int(read.group(1)) > 0, out.stdout
    assert "worker a: 2 live workers, 4 shards to read; took none, gave back shardId-" in out.stderr, out.stderr[-3000:]


def test_demo_against_an_emulator_needs_no_aws_credentials(kinesalite, zookeeper, tmp_path) -> None:
    """`kinesis-spout demo --endpoint-url` used to fail with "Unable to locate credentials" after "using existing
    stream": only the embedded servers got dummy credentials."""
    stream = kinesalite.create_stream(shards=1)
    out = subprocess.run([sys.executable, "-m", "kinesis_spout.cli", "demo", "--endpoint-url",
                          kinesalite.endpoint_url, "--zookeeper", zookeeper.hosts, "--stream", stream,
                          "--duration", "1", "--rate", "200"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, env=no_aws_credentials_env(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"[demo] using existing stream {stream!r}" in out.stdout
    assert "no AWS credentials configured: using dummy ones" in out.stdout
    final = [line.split() for line in out.stdout.splitlines() if line.startswith("[demo] read ")]
    assert final and final[0][2] == final[0][4] and int(final[0][2]) > 0, out.stdout  # "read N of N sentences"


def test_demo_runs_on_embedded_servers_and_reads_everything_it_produced() -> None:
    out = subprocess.run([sys.executable, "-m", "kinesis_spout.demo", "--duration", "2", "--rate", "500"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env=this_checkout({k: v for k, v in os.environ.items() if not k.startswith("KINESIS_SPOUT_")}))
    assert out.returncode == 0, out.stdout + out.stderr
    final = [line for line in out.stdout.splitlines() if line.startswith("[demo] read ")]
    assert final, out.stdout
    words = final[0].split()
    assert words[2] == words[4] and int(words[2]) > 0  # "read N of N sentences"
    assert "[demo]   the" in out.stdout


def assert_the_wordcount_counted_everything(out: subprocess.CompletedProcess[str], engine: str) -> None:
    """What a person reads after ``examples/wordcount.py`` without ``--exactly-once``: every sentence produced was
    processed and words were counted; with the pipeline engine, the poison sentences were retried and then
    dead-lettered (one WARNING line per batch of letters), and the batch lines sum the lag up; no server's
    traceback or HTML page anywhere."""
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    final = [line.split() for line in out.stdout.splitlines() if " sentences of " in line]
    assert final, out.stdout
    processed, produced = int(final[0][1]), int(final[0][4])
    assert produced > 0 and processed >= produced  # "[wordcount] N sentences of M produced"
    if engine == "pipeline":  # the README promises the poison sentences are seen retried, then dead-lettered
        poison = re.search(r"\[wordcount\] (\d+) poison sentences failed, retried \d+ times, dead-lettered: (\d+), "
                           r"kept in (\S+\.jsonl) \(see them: kinesis-spout dead-letters list \3\)", out.stdout)
        assert poison and 0 < int(poison[1]) == int(poison[2]), out.stdout
        # where the letters are: the file named, holding each of them
        assert len(Path(poison[3]).read_text().splitlines()) == int(poison[1]), poison[3]
        # summarised: the first letter of each shard says where they go, later ones are counted (none per letter)
        firsts = re.findall(r"WARNING kinesis_spout\.deadletters\.local: dead letters of shardId-\d+ go to "
                            r"(\S+\.jsonl) ", out.stderr)
        assert firsts and set(firsts) == {poison[3]} and len(firsts) <= 4, out.stderr[-3000:]
        assert "dead letter shardId" not in out.stdout + out.stderr, out.stderr[-3000:]
    counts = {parts[1]: int(parts[2]) for parts in (line.split() for line in out.stdout.splitlines())
              if len(parts) == 3 and parts[0] == "[wordcount]" and parts[2].isdigit()}
    assert counts.get("the", 0) > 0, out.stdout
    # output a person reads: no server's traceback or HTML page, batch lines that sum the lag up
    assert "Traceback" not in out.stderr and "<!doctype" not in out.stderr.lower(), out.stderr[-3000:]
    if engine == "pipeline":
        batches = [line for line in out.stderr.splitlines() if "INFO kinesis_spout.spark.pipeline.loop: batch " in line]
        assert batches and all(len(line) < 230 and "shardId-" not in line and " of 4 shards behind" in line
                               for line in batches), batches


@pytest.mark.spark  # a Spark driver in a subprocess
def test_spark_wordcount_demo_counts_everything_it_produced() -> None:
    """What ``make demo DEMO_ARGS="--engine stream"`` runs, shortened: embedded servers, a producer, Storm's word
    count on Spark through readStream. The default engine (the pipeline) is run by the next test, on servers of
    the test's own: starting the embedded servers is the same for both engines, and the exactly-once runs below
    start them too."""
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "wordcount.py"), "--demo", "--engine", "stream",
                          "--seconds", "3", "--rate", "500"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=quick_start_env(this_checkout({k: v for k, v in os.environ.items()
                                                            if not k.startswith("KINESIS_SPOUT_")})))
    assert_the_wordcount_counted_everything(out, "stream")


@pytest.mark.spark  # a Spark driver in a subprocess
def test_make_demo_against_your_own_servers_needs_no_aws_credentials(kinesalite, zookeeper, tmp_path) -> None:
    """`KINESIS_SPOUT_ENDPOINT_URL=... make demo` runs this command line (the Makefile's demo recipe) with the
    variables in its environment: on an emulator, without AWS credentials, the default engine (the pipeline)
    counts everything produced and dead-letters the poison sentences after their retries."""
    stream = kinesalite.create_stream(shards=4)
    env = no_aws_credentials_env(tmp_path, KINESIS_SPOUT_ENDPOINT_URL=kinesalite.endpoint_url,
                                 KINESIS_SPOUT_ZOOKEEPER=zookeeper.hosts, KINESIS_SPOUT_STREAM=stream)
    assert "$(PY) examples/wordcount.py --demo $(DEMO_ARGS)" in (ROOT / "Makefile").read_text()
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "wordcount.py"), "--demo", "--seconds", "3",
                          "--rate", "500"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env=quick_start_env(env))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"[demo] using existing stream {stream!r}" in out.stdout
    assert "engine: pipeline" in out.stdout, out.stdout
    assert_the_wordcount_counted_everything(out, "pipeline")


@pytest.mark.spark  # a Spark driver in a subprocess
@pytest.mark.parametrize("engine, backend", [("pipeline", "redis"), ("stream", "memcached")])
def test_spark_wordcount_demo_exactly_once(engine: str, backend: str) -> None:
    """`make demo DEMO_ARGS="--exactly-once redis"`, shortened: the counts live in an OpaqueMap in a private Redis
    (or memcached) server and are read back from it."""
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "wordcount.py"), "--demo", "--engine", engine,
                          "--exactly-once", backend, "--seconds", "3", "--rate", "500"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=quick_start_env(this_checkout({k: v for k, v in os.environ.items()
                                                            if not k.startswith("KINESIS_SPOUT_")})))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"exactly-once counts read back from {backend} at" in out.stdout, out.stdout
    final = [line.split() for line in out.stdout.splitlines() if " sentences of " in line]
    assert final and int(final[0][4]) > 0 and int(final[0][1]) >= int(final[0][4]), out.stdout
    counts = {parts[1]: int(parts[2]) for parts in (line.split() for line in out.stdout.splitlines())
              if len(parts) == 3 and parts[0] == "[wordcount]" and parts[2].isdigit()}
    # words of one demo sentence each are counted alike ("four score and seven years ago", "snow white and the
    # seven dwarfs": the only sentences with "and" and "seven"): the stored counts agree with each other
    assert counts["and"] == counts["seven"] > 0, out.stdout
    for sentence in ("four score years ago", "snow white dwarfs"):
        assert len({counts[w] for w in sentence.split() if w in counts}) <= 1, out.stdout
    if "four" in counts and "snow" in counts:
        assert counts["and"] == counts["four"] + counts["snow"], out.stdout
