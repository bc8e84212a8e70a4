"""``writeStream.format("kinesis_spout")``: a streaming query from text files into a stream. Without failures every
row arrives once; across SIGKILLs of the driver (a subprocess) and restarts from its checkpoint location every row
arrives at least once (a micro-batch cut short is written again on restart)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout.spark import register
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spark import quick_start_env

from .support import read_with_spout, stored, write_files

WRITER = Path(__file__).parents[1] / "procs" / "sink_stream_writer.py"


def test_a_streaming_write_puts_every_row_once(kinesalite: KinesisEndpoint, spark: Any, tmp_path: Path) -> None:
    register(spark)
    stream = kinesalite.create_stream(shards=2)
    ids = write_files(tmp_path / "in", files=3, per_file=100)
    lines = spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(tmp_path / "in"))
    query = (lines.selectExpr("concat('k', value) AS partitionKey", "value AS data").writeStream
             .format("kinesis_spout").option("streamName", stream).option("endpointUrl", kinesalite.endpoint_url)
             .option("region", kinesalite.region).option("aggregate", "true")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    got = Counter(r.data.decode() for r in read_with_spout(kinesalite, stream, len(ids)))
    assert got == Counter(ids)


@pytest.mark.crash
@pytest.mark.spark  # a Spark driver in a subprocess
@pytest.mark.slow
def test_sigkill_of_a_streaming_writer_and_a_restart_write_every_row_at_least_once(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=2)
    ids = write_files(tmp_path / "in", files=6, per_file=50)
    argv = [sys.executable, str(WRITER), "--input", str(tmp_path / "in"), "--stream", stream,
            "--endpoint-url", kinesalite.endpoint_url, "--checkpoint-location", str(tmp_path / "ck")]
    env = quick_start_env({**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"})
    kills = 0
    for progress in (100,):
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)  # its own group: the JVM and Python workers die with it
        try:
            assert wait_until(lambda: stored(kinesalite, stream) >= progress or proc.poll() is not None, 120, 0.5), \
                "the writer made no progress"
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
            os.killpg(proc.pid, signal.SIGKILL)
            kills += 1
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    final = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    assert final.returncode == 0, final.stderr[-3000:]
    total = stored(kinesalite, stream)
    got = Counter(r.data.decode() for r in read_with_spout(kinesalite, stream, total))
    missing = set(ids) - set(got)
    assert not missing, f"{len(missing)} rows never written, e.g. {sorted(missing)[:3]}"
    assert set(got) == set(ids)
    duplicates = sum(n - 1 for n in got.values())
    print(f"\n[sink crash] {kills} SIGKILLs: {len(ids)} rows, {total} records, {duplicates} written twice")
    assert duplicates <= kills * 100, "a restart writes again at most the micro-batch cut short"
