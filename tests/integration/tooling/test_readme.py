"""Every Python snippet of README.md runs as printed, against the servers `kinesis-spout dev-servers` starts, and
every link of README.md leads to a page and a heading that exist.

Snippets are the ```python blocks that follow a ``<!-- readme-snippet: NAME -->`` line, in README.md and in the
documentation site (docs/: the snippets the README shows are there too, and the site's snippets that need a process
of their own, a signal or a pytest run are named this way). Each runs in a process of its own with only the exports
that `dev-servers` printed (plus a PATH that finds this interpreter), as a reader who pasted them would run it.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any, Iterator

import pytest

from kinesis_spout.testing.process import wait_until

from .snippets import README, ROOT, all_blocks, blocks

#: Every snippet and the test that runs it.
TESTED = {"put": "dev_env", "quickstart": "test_quickstart_reads_acks_dead_letters_and_stops_cleanly_on_ctrl_c",
          "pipeline": "test_pipeline_snippet_counts_each_record_once_and_stops_on_sigterm",
          "readstream": "test_readstream_snippet_reads_what_is_there_and_ends",
          "write": "test_write_snippet_puts_its_two_sentences_into_the_stream",
          "fixtures": "test_fixture_example_is_a_complete_passing_test_file",
          "memory-store": "test_memory_store_example_is_a_complete_passing_test_file_without_zookeeper"}


def snippets() -> dict[str, str]:
    """Each readme-snippet's code by name; a name shown in several places must show the same code everywhere."""
    found: dict[str, str] = {}
    for block in all_blocks():
        name = block.readme_snippet
        if name is None:
            continue
        assert found.get(name, block.code) == block.code, f"{block.id}: snippet {name!r} differs from its other copy"
        found[name] = block.code
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:  # a zombie awaiting its reaper is dead too
            return stat.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything that points at servers or credentials, plus ``extra``."""
    drop = ("KINESIS_SPOUT_", "AWS_", "PYSPARK_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["AWS_EC2_METADATA_DISABLED"] = "true"  # no instance-metadata probe for credentials on a machine without
    return {**env, **extra}


class DevServers:
    """``kinesis-spout dev-servers`` as a child process: ``start()`` waits for its exports, ``stop(sig)`` signals it
    and returns its exit code. Who calls: the tests of this module."""

    def __init__(self, *args: str) -> None:
        self.args = list(args)
        self.proc: subprocess.Popen[str] | None = None
        self.exports: dict[str, str] = {}
        self.output: list[str] = []

    def start(self) -> "DevServers":
        self.proc = subprocess.Popen([sys.executable, "-m", "kinesis_spout.cli", "dev-servers", *self.args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(),
                                     start_new_session=True)  # a process group of its own, as in a terminal
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in self.proc.stdout:  # ends when it exits; the last line printed once ready says Ctrl-C
            self.output.append(line)
            if line.startswith("export "):
                name, _, value = line[len("export "):].strip().partition("=")
                self.exports[name] = value
            if "Ctrl-C stops" in line or time.monotonic() > deadline:
                break
        assert "Ctrl-C stops" in self.output[-1], "".join(self.output)
        return self

    def stop(self, sig: int = signal.SIGTERM, *, group: bool = False) -> int:
        """Send ``sig`` to the process (or, ``group=True``, to its process group as a terminal's Ctrl-C does)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            if group:
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)
        code = self.proc.wait(30)
        if self.proc.stdout is not None:
            self.output.append(self.proc.stdout.read())
        return code


@pytest.fixture(scope="module")
def dev_env() -> Iterator[dict[str, str]]:
    """dev-servers on free ports with a stream of this module's own, and the README's put snippet run once."""
    servers = DevServers("--zookeeper-port", "0", "--kinesis-port", "0", "--stream",
                         f"readme-{uuid.uuid4().hex[:8]}").start()
    try:
        env = clean_env(**servers.exports)
        done = subprocess.run([sys.executable, "-c", snippets()["put"]], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        yield env
    finally:
        servers.stop()


class Lines:
    """The lines a child prints, read by a daemon thread so that a child that prints nothing cannot block a test
    past its time-out. ``until(want, timeout_s)`` waits for ``want(lines)``; ``rest()`` collects the remainder
    once the child has exited."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._got: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in iter(stream.readline, ""):
            self._got.put(line)
        self._got.put(None)

    def until(self, want: Any, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not want(self.lines):
            try:
                line = self._got.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if line is None:
                return bool(want(self.lines))
            self.lines.append(line)
        return True

    def rest(self, timeout_s: float = 30.0) -> list[str]:
        self.until(lambda _lines: not self._thread.is_alive() and self._got.empty(), timeout_s)
        return self.lines


def test_every_python_block_of_the_readme_is_a_snippet_that_a_test_runs() -> None:
    text = README.read_text()
    found = snippets()
    named = [b for b in blocks(README) if b.readme_snippet]
    assert text.count("```python\n") == len(named), "a ```python block of README.md has no readme-snippet line"
    assert set(found) == set(TESTED), f"snippets without a test: {set(found) - set(TESTED)}"
    assert all(name in globals() for name in TESTED.values())


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_dev_servers_print_exports_that_work_and_stop_with_their_servers(how: str) -> None:
    import boto3
    from kazoo.client import KazooClient

    servers = DevServers("--zookeeper-port", "0", "--kinesis-port", "0", "--stream", "dev-check", "--shards",
                         "3").start()
    try:
        assert servers.proc is not None
        env = servers.exports
        assert set(env) == {"KINESIS_SPOUT_ZOOKEEPER", "KINESIS_SPOUT_ENDPOINT_URL", "KINESIS_SPOUT_STREAM",
                            "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"}
        documented = [line.split("=")[0].split()[-1] for line in README.read_text().splitlines()
                      if line.startswith("    export ")]
        assert documented == list(env), "the Quick start shows other export lines than dev-servers prints"
        kids = children(servers.proc.pid)
        assert len(kids) == 2 and all(alive(pid) for pid in kids), kids
        kinesis = boto3.client("kinesis", endpoint_url=env["KINESIS_SPOUT_ENDPOINT_URL"],
                               region_name=env["AWS_DEFAULT_REGION"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                               aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
        shards = kinesis.list_shards(StreamName="dev-check")["Shards"]
        assert len(shards) == 3
        kinesis.put_record(StreamName="dev-check", Data=b"x", PartitionKey="k")
        zk = KazooClient(hosts=env["KINESIS_SPOUT_ZOOKEEPER"])
        zk.start(timeout=10)
        try:
            zk.ensure_path("/dev-check")
            assert zk.exists("/dev-check")
        finally:
            zk.stop()
            zk.close()
        if how == "SIGTERM":
            assert servers.stop(signal.SIGTERM) == 0
        else:  # the terminal sends SIGINT to the whole foreground group: the servers must not die before a stop
            assert servers.stop(signal.SIGINT, group=True) == 0
        output = "".join(servers.output)
        assert f"{'SIGTERM' if how == 'SIGTERM' else 'SIGINT'}: stopping ZooKeeper and kinesalite" in output, output
        assert "stopped on its own" not in output and "Traceback" not in output
        assert wait_until(lambda: not any(alive(pid) for pid in kids), 10), "a server outlived dev-servers"
    finally:
        servers.stop(signal.SIGKILL)


def test_dev_servers_refuse_a_taken_port_naming_the_flag(zookeeper) -> None:
    done = subprocess.run([sys.executable, "-m", "kinesis_spout.cli", "dev-servers", "--zookeeper-port",
                           str(zookeeper.server.port)], capture_output=True, text=True, timeout=60, env=clean_env())
    assert done.returncode == 1
    assert f"port {zookeeper.server.port} for ZooKeeper is taken" in done.stderr
    assert "--zookeeper-port 0" in done.stderr


def test_quickstart_reads_acks_dead_letters_and_stops_cleanly_on_ctrl_c(dev_env, tmp_path) -> None:
    """The blank sentence fails every attempt: dead-lettered after its retries (kept whole in the default dead-letter
    file of the working directory, one log line naming it), the others printed once each; SIGINT (Ctrl-C) ends the
    loop without a traceback and the checkpoints cover every record."""
    stderr_path = tmp_path / "stderr"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", snippets()["quickstart"]], text=True, cwd=tmp_path,
                                env={**dev_env, "PYTHONPATH": str(ROOT)},  # this checkout, from another folder
                                stdout=subprocess.PIPE, stderr=stderr)
    assert proc.stdout is not None
    output = Lines(proc.stdout)
    try:
        assert output.until(lambda got: len(got) >= 2, 60), output.lines
        assert wait_until(lambda: "dead letter" in stderr_path.read_text(), 30), stderr_path.read_text()
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = output.rest()
    err = stderr_path.read_text()
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert sorted(lines[:2]) == ["6 words: the cow jumped over the moon\n",
                                 "8 words: an apple a day keeps the doctor away\n"]
    assert lines[2:] == ["stopped; the next run resumes after the checkpoints\n"]
    assert err.count("dead letter") == 1 and "failed on attempt 4 of 4" in err
    kept = tmp_path / "kinesis-spout-dead-letters" / "quickstart" / f"{dev_env['KINESIS_SPOUT_STREAM']}.jsonl"
    assert str(kept) in err
    letters = [json.loads(line) for line in kept.read_text().splitlines()]
    assert [(d["reason"], base64.b64decode(d["data"]).strip()) for d in letters] == [("failed on attempt 4 of 4", b"")]
    listing = subprocess.run([sys.executable, "-m", "kinesis_spout.cli", "checkpoints", "--stream",
                              dev_env["KINESIS_SPOUT_STREAM"], "--app", "quickstart"],
                             env=dev_env, capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    stored = {row.split()[0]: row.split()[1] for row in listing.stdout.splitlines() if row.startswith("shardId-")}
    assert stored == last_sequence_numbers(dev_env)  # a rerun reads nothing: everything is behind a checkpoint


def last_sequence_numbers(env: dict[str, str]) -> dict[str, str]:
    import boto3

    client = boto3.client("kinesis", endpoint_url=env["KINESIS_SPOUT_ENDPOINT_URL"],
                          region_name=env["AWS_DEFAULT_REGION"], aws_access_key_id="test",
                          aws_secret_access_key="test")
    stream = env["KINESIS_SPOUT_STREAM"]
    last: dict[str, str] = {}
    for shard in client.list_shards(StreamName=stream)["Shards"]:
        it = client.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                       ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records = client.get_records(ShardIterator=it)["Records"]
        if records:
            last[shard["ShardId"]] = records[-1]["SequenceNumber"]
    return last


@pytest.mark.spark  # a Spark driver in a subprocess
def test_pipeline_snippet_counts_each_record_once_and_stops_on_sigterm(dev_env, tmp_path) -> None:
    """The blank sentence is failed before anything is written, so its empty "words" never reach the table,
    however often it is retried; the other words are counted once. SIGTERM ends run() cleanly."""
    stderr_path = tmp_path / "stderr"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", snippets()["pipeline"]], env=dev_env, text=True,
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=stderr)
    try:
        assert wait_until(lambda: "dead letter" in stderr_path.read_text() or proc.poll() is not None, 180)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = stderr_path.read_text()
    assert proc.returncode == 0 and "Traceback" not in err, out[-2000:] + err[-3000:]
    assert "failed on attempt 4 of 4" in err
    counts = {cells[0]: int(cells[1]) for cells in
              ([c.strip() for c in row.strip("|").split("|")] for row in out.splitlines() if row.startswith("|"))
              if cells[1].isdigit()}
    assert counts == {"the": 3, "cow": 1, "jumped": 1, "over": 1, "moon": 1, "an": 1, "apple": 1, "a": 1, "day": 1,
                      "keeps": 1, "doctor": 1, "away": 1}, out
    assert "1 dead-lettered" in out


@pytest.mark.spark  # a Spark driver in a subprocess
def test_readstream_snippet_reads_what_is_there_and_ends(dev_env, tmp_path) -> None:
    """availableNow: the query reads the stream's three records, ends by itself, and checkpoints under TMPDIR."""
    done = subprocess.run([sys.executable, "-c", snippets()["readstream"]], env={**dev_env, "TMPDIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = [row.strip("|").strip() for row in done.stdout.splitlines() if row.startswith("|")]
    assert sorted(rows) == ["", "an apple a day ke...", "line", "the cow jumped ov..."], done.stdout
    assert (tmp_path / "kinesis-spout-checkpoints" / "wordcount-stream" / "offsets").is_dir()


@pytest.mark.spark  # a Spark driver in a subprocess
def test_write_snippet_puts_its_two_sentences_into_the_stream(dev_env, tmp_path) -> None:
    """df.write as printed (mode "append": Spark refuses its default mode for Python data sources) puts each row
    once with its partition key; into a stream of its own here, so that the other snippets' stream keeps its three
    sentences."""
    import boto3

    client = boto3.client("kinesis", endpoint_url=dev_env["KINESIS_SPOUT_ENDPOINT_URL"],
                          region_name=dev_env["AWS_DEFAULT_REGION"], aws_access_key_id="test",
                          aws_secret_access_key="test")
    stream = f"readme-write-{uuid.uuid4().hex[:8]}"
    client.create_stream(StreamName=stream, ShardCount=1)
    client.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.2})
    done = subprocess.run([sys.executable, "-c", snippets()["write"]],
                          env={**dev_env, "KINESIS_SPOUT_STREAM": stream}, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    shard = client.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    it = client.get_shard_iterator(StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    got = sorted((r["PartitionKey"], r["Data"]) for r in client.get_records(ShardIterator=it)["Records"])
    assert got == [("dog", b"jumps over the lazy dog"), ("fox", b"the quick brown fox")]


def test_fixture_example_is_a_complete_passing_test_file(tmp_path) -> None:
    (tmp_path / "test_readme_fixture.py").write_text(snippets()["fixtures"])
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_readme_fixture.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=180, env=clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout, done.stdout


def test_memory_store_example_is_a_complete_passing_test_file_without_zookeeper(tmp_path) -> None:
    """The testing page's MemoryCheckpointStore example passes with moto alone: no Java on the PATH, no ZooKeeper."""
    (tmp_path / "test_memory_store.py").write_text(snippets()["memory-store"])
    env = clean_env(PATH=os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                         if not (Path(p) / "java").exists()), JAVA_HOME="/nonexistent")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_memory_store.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout, done.stdout


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) and GitHub give a heading: lower case, punctuation dropped,
    spaces as dashes."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors_of(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)  # no headings inside code blocks
    return {slug(line.lstrip("#").strip()) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def test_every_link_of_the_readme_leads_to_a_page_and_a_heading_that_exist() -> None:
    """Relative links of README.md (into the site's pages and the repository) name files that exist, and their
    #anchors name headings of those pages."""
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local, "README.md links to no page of the site"
    for link in local:
        path, _, anchor = link.partition("#")
        target = (ROOT / path) if path else README
        assert target.is_file(), f"README.md links to {link!r}: {target.relative_to(ROOT)} does not exist"
        if anchor:
            assert anchor in anchors_of(target), f"README.md links to {link!r}: no heading of that page has it"
    assert any(link.startswith("docs/") for link in local)


def test_the_sections_that_other_files_point_to_exist() -> None:
    pointed = re.findall(r'see (docs/[\w/.-]+\.md), "([^"]+)"', (ROOT / "scripts" / "setup.sh").read_text())
    assert pointed == [("docs/testing.md", "Using your own servers")]
    for page, heading in pointed:
        assert slug(heading) in anchors_of(ROOT / page), f"{page} has no heading {heading!r}"
