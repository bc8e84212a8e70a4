"""A round asked for at once (``ShardSync.wake``: a worker joined or left, a shard finished) on kinesalite: it writes
the pending checkpoints first only when the listing has a closed shard whose end is not stored, the only case in
which a child may wait on an end not written yet. The checkpoint store is the project's in-memory one."""

from __future__ import annotations

from kinesis_spout import MemoryCheckpointStore
from kinesis_spout.coordination.sync import ShardSync
from kinesis_spout.kinesis.shards import Shard
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until


def test_a_wake_waits_for_pending_checkpoints_only_when_a_shard_may_have_finished(kinesalite: KinesisEndpoint) -> None:
    """On a stream of open shards a wake goes to the round at once: a worker's flush waits up to 10 s while records
    keep coming, and a lease worker woken by another worker's death would wait that long to take its shards. Once a
    shard is closed (a split) and its end is not stored, a wake writes the pending checkpoints first."""
    stream = kinesalite.create_stream(shards=2)
    client = kinesalite.client()
    flushes: list[float] = []
    rounds: list[list[str]] = []

    def owns(ready: list[Shard]) -> list[Shard]:
        rounds.append([s.shard_id for s in ready])
        return []

    def flush(timeout_s: float) -> bool:
        flushes.append(timeout_s)
        return True

    sync = ShardSync(client, stream, MemoryCheckpointStore(), interval_s=60.0, round_s=60.0, owns=owns, known=set,
                     add=lambda shards: None, flush=flush, on_error=lambda exc: None)
    sync.start()
    try:
        sync.wake()
        assert wait_until(lambda: len(rounds) >= 1, 60.0), "no round after the wake"
        assert flushes == [], "a wake on a stream of open shards waited for the pending checkpoints"
        parent = sorted(kinesalite.shard_ids(stream))[0]
        client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 126))
        wait_for_stream(client, stream)
        sync.wake()
        assert wait_until(lambda: len(rounds) >= 2, 60.0), "no round after the second wake"
        assert flushes == [10.0], "a wake with a closed shard whose end is not stored did not flush first"
        assert parent in rounds[1]
    finally:
        sync.close()
