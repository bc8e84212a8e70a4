"""A consumer that acks whole batches (``SpoutBatch.ack``, with some tuples failed through ``ack_except``; or the
rows of columnar batches, ``ColumnBatch.ack_except``) is SIGKILLed between two batches, several times: the runs after
it lose nothing, and the stored checkpoints never move backwards and end at each shard's last record. kinesalite and
a real ZooKeeper through the fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kinesis_spout import InitialPosition, KinesisSpout, SpoutConfig
from kinesis_spout.testing import CrashPoint, kill_at, stored_checkpoints
from kinesis_spout.testing.kinesis import KinesisEndpoint

pytestmark = pytest.mark.crash

RECORDS = 300


def consume(config: SpoutConfig, log: str, total: int, columns: bool, crash: CrashPoint) -> None:
    """The consumer under test, in the child: each batch's effects (one line a tuple) are written, every 7th tuple
    of first emission is failed, the rest acked whole; then the acks are reported (the crash falls there, between two
    batches). Returns once ``total`` distinct records were processed by it and the runs before. ``columns``: the
    batches are columnar (``next_columns``), failed by row."""
    seen = set(Path(log).read_text().splitlines())  # what the runs before this one processed
    with KinesisSpout(config) as spout, open(log, "a", buffering=1) as out:
        while len(seen) < total:
            if columns:
                rows = spout.next_columns(max_records=40, timeout_s=0.5)
                failed_rows = [i for i, r in enumerate(rows)
                               if rows.attempts[i] == 1 and int(r.sequence_number) % 7 == 0]
                done = [rows.message_id(i) for i in range(len(rows)) if i not in set(failed_rows)]
                out.write("".join(f"{m}\n" for m in done))
                rows.ack_except(failed_rows)
                seen.update(done)
                if done:
                    crash.acked(len(done))
                continue
            batch = spout.next_batch(max_records=40, timeout_s=0.5)
            failed = [t.message_id for t in batch if t.attempt == 1 and int(t.record.sequence_number) % 7 == 0]
            done = [t.message_id for t in batch if t.message_id not in set(failed)]
            out.write("".join(f"{m}\n" for m in done))
            batch.ack_except(failed)
            seen.update(done)
            if done:
                crash.acked(len(done))
        assert spout.flush_checkpoints()


@pytest.mark.parametrize("columns", [False, True], ids=["tuples", "columns"])
def test_sigkill_between_batches_acked_whole_loses_nothing(kinesalite: KinesisEndpoint, zookeeper: Any,
                                                           tmp_path: Path, columns: bool) -> None:
    stream = kinesalite.create_stream(shards=3)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(RECORDS)], [f"k{i}" for i in range(RECORDS)])
    config = SpoutConfig(stream_name=stream, app_name=f"batch-crash-{columns}", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region, coordination="static", initial_position=InitialPosition.TRIM_HORIZON,
                         checkpoint_interval_s=0.0, empty_record_backoff_s=0.2, max_records_per_call=25)
    log = tmp_path / "effects"
    log.touch()
    history: list[dict[str, int]] = []
    for after in (60, 50, 70) if not columns else (60, 50):  # the columnar run: one kill fewer (the suite's time)
        run = kill_at(consume, config, str(log), RECORDS, columns, after_acks=after, timeout_s=120)
        assert run.killed, f"the consumer ended by itself (exit code {run.exit_code})"
        stored = {shard: int(cp.sequence_number) for shard, cp in stored_checkpoints(config).items()}
        if history:
            assert all(stored.get(shard, 0) >= seq for shard, seq in history[-1].items()), "a checkpoint went back"
        history.append(stored)
    final = kill_at(consume, config, str(log), RECORDS, columns, after_acks=None, timeout_s=120)
    assert final.exit_code == 0 and not final.killed
    processed = set(log.read_text().splitlines())
    expected = {f"{shard}:{seq}" for shard, seq in placed}
    assert processed >= expected, f"{len(expected - processed)} records never processed"
    last = {}
    for shard, seq in placed:
        last[shard] = max(last.get(shard, 0), int(seq))
    assert {s: int(cp.sequence_number) for s, cp in stored_checkpoints(config).items()} == last
