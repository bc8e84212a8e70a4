"""The examples and the demo run and print real results."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_spout_wordcount_example_counts_words(moto_kinesis, zookeeper) -> None:
    stream = moto_kinesis.create_stream("sentences", shards=2)
    moto_kinesis.put(stream, ["the cow jumped over the moon"] * 30 + ["four score and seven years ago"] * 10)
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "spout_wordcount.py"), "--stream", stream, "--zookeeper",
         zookeeper.hosts, "--endpoint-url", moto_kinesis.endpoint_url, "--seconds", "3"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "AWS_ACCESS_KEY_ID": "test",
                                                         "AWS_SECRET_ACCESS_KEY": "test"})
    assert out.returncode == 0, out.stderr
    lines = dict(line.split() for line in out.stdout.splitlines())
    assert lines["the"] == "60" and lines["cow"] == "30" and lines["seven"] == "10"


def test_demo_runs_on_embedded_servers_and_reads_everything_it_produced() -> None:
    out = subprocess.run([sys.executable, "-m", "kinesis_spout.demo", "--duration", "2", "--rate", "500"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={k: v for k, v in os.environ.items() if not k.startswith("KINESIS_SPOUT_")})
    assert out.returncode == 0, out.stdout + out.stderr
    final = [line for line in out.stdout.splitlines() if line.startswith("[demo] read ")]
    assert final, out.stdout
    words = final[0].split()
    assert words[2] == words[4] and int(words[2]) > 0  # "read N of N sentences"
    assert "[demo]   the" in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["pipeline", "stream"])
def test_spark_wordcount_demo_counts_everything_it_produced(engine: str) -> None:
    """What ``make demo`` runs, shortened: embedded servers, a producer, Storm's word count on Spark."""
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "wordcount.py"), "--demo", "--engine", engine,
                          "--seconds", "3", "--rate", "500"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={k: v for k, v in os.environ.items() if not k.startswith("KINESIS_SPOUT_")})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    final = [line.split() for line in out.stdout.splitlines() if " sentences of " in line]
    assert final, out.stdout
    processed, produced = int(final[0][1]), int(final[0][4])
    assert produced > 0 and processed >= produced  # "[wordcount] N sentences of M produced"
    counts = {parts[1]: int(parts[2]) for parts in (line.split() for line in out.stdout.splitlines())
              if len(parts) == 3 and parts[0] == "[wordcount]" and parts[2].isdigit()}
    assert counts.get("the", 0) > 0, out.stdout
