"""``writeStream.format("kinesis_spout")`` across a killed executor task: the Python worker running a write task is
SIGKILLed after the task put its first Arrow batch and before its last; Spark runs the task again and every row
arrives at least once, the rows put before the kill twice (Kinesis cannot take records back)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spark import quick_start_env

from .support import read_with_spout, stored, write_files

WRITER = Path(__file__).parents[1] / "procs" / "sink_task_kill_writer.py"


@pytest.mark.crash
@pytest.mark.spark  # a Spark driver in a subprocess
@pytest.mark.slow
def test_a_write_task_whose_python_worker_is_sigkilled_is_run_again_and_every_row_arrives_at_least_once(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=2)
    ids = write_files(tmp_path / "in", files=2, per_file=100)
    gate = tmp_path / "gate"
    gate.mkdir()
    argv = [sys.executable, str(WRITER), "--input", str(tmp_path / "in"), "--stream", stream,
            "--endpoint-url", kinesalite.endpoint_url, "--checkpoint-location", str(tmp_path / "ck"),
            "--gate", str(gate)]
    env = quick_start_env({**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"})
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        pid_file = gate / "pid"
        assert wait_until(lambda: pid_file.exists() or proc.poll() is not None, 90, 0.2), "no task reached the gate"
        assert proc.poll() is None, (proc.stderr.read() if proc.stderr else "")[-3000:]
        worker = int(pid_file.read_text())
        assert worker != proc.pid, "the task runs in a Python worker, not in the driver"
        put_before = stored(kinesalite, stream)
        assert 0 < put_before < len(ids), "the task was stopped after its first batch was put, before its last"
        os.kill(worker, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    total = stored(kinesalite, stream)
    got = Counter(r.data.decode() for r in read_with_spout(kinesalite, stream, total))
    missing = set(ids) - set(got)
    assert not missing, f"{len(missing)} rows never written, e.g. {sorted(missing)[:3]}"
    assert set(got) == set(ids)
    twice = sorted(row for row, n in got.items() if n > 1)
    assert len(twice) == put_before and max(got.values()) == 2, \
        "the task run again puts again exactly what the killed attempt had put"
    assert total == len(ids) + put_before
