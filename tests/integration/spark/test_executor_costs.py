"""What ``readMode=executors`` costs ZooKeeper per caught-up batch, counted (not timed) on real servers.

The stream reader is driven as Spark drives it (latestOffset, partitions, read, commit), without a session, on
kinesalite and moto, and a real ZooKeeper behind the project's proxy, which counts every request the reader's
sessions send (the driver's and the task's). A caught-up stream of many shards where only some receive records:
a batch costs ZooKeeper a few requests plus two per task, whatever the number of shards with new records (a task
reads up to ``shardsPerTask`` of them and records their ends in one node), and an idle shard gets no task.
The driver's checkpoint copies of the shards it wrote before go in one transaction, which never overwrites a
checkpoint another writer moved meanwhile.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from kinesis_spout import ZooKeeperCheckpointStore
from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.positions import after
from kinesis_spout.spark.source import WORKER_CLIENTS, ExecutorStreamReader
from kinesis_spout.spark.source.executor_batches import PlannedBatch
from kinesis_spout.spark.source.offsets import parse_source_options
from kinesis_spout.spark.source.planning import QueryPlanning
from kinesis_spout.testing.kinesis import KinesisEndpoint, keys_on
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.zkproxy import Op, ZooKeeperFaultProxy

from .support import executor_options, message_ids, read_partition

SHARDS = 8
ROUNDS = 7  # enough batches for old recorded ends to be cleaned up within them
BUSY = 4  # shards that receive records between the caught-up batches: read by one task (shardsPerTask 32)
#: requests per caught-up batch at most, transactions left out: one per batch (its node), plus this many per task
#: (it records its shards' ends in one node, the driver reads it)
PER_BATCH, PER_TASK = 1, 2
#: transactions per caught-up batch at most: the checkpoint copies when it is planned and when it is committed (each
#: at most once per checkpointIntervalS, so both in one batch only when it took that long), a clean-up of old ends
TRANSACTIONS = 3



def requests(proxy: ZooKeeperFaultProxy) -> tuple[int, int]:
    """The requests the proxy passed on so far, pings left out (an idle session's, not the reader's work): those
    that are not transactions, and the transactions."""
    sent = proxy.requests()
    return sum(n for op, n in sent.items() if op not in (Op.PING, Op.MULTI)), sent.get(Op.MULTI, 0)


def one_batch(reader: ExecutorStreamReader, start: dict[str, Any]) -> tuple[dict[str, Any], list[Any], list[str]]:
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end != start, "no batch was planned though a shard had new records"
    parts = list(reader.partitions(start, end))
    ids = [mid for part in parts for mid in read_partition(reader, part)]
    reader.commit(end)
    return end, parts, ids


@pytest.mark.parametrize("emulator", ["kinesalite", "moto_kinesis"])
def test_a_caught_up_batch_costs_zookeeper_a_few_requests_plus_two_per_task_not_per_shard_with_new_records(
        emulator: str, request: pytest.FixtureRequest, zookeeper: Any) -> None:
    kinesalite: KinesisEndpoint = request.getfixturevalue(emulator)
    stream = kinesalite.create_stream(shards=SHARDS)
    client = kinesalite.client()
    shard_ids = sorted(s["ShardId"] for s in client.list_shards(StreamName=stream)["Shards"])
    busy = shard_ids[:BUSY]
    keys = [keys_on(client, stream, shard_id, ROUNDS * 5) for shard_id in busy]
    # a backlog on every shard: each gets its first checkpoint (a one-off compare-and-set) before the counts
    kinesalite.put(stream, [f"warm-{i}".encode() for i in range(SHARDS * 2)],
                   [k for shard_id in shard_ids for k in keys_on(client, stream, shard_id, 2)])
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        options = {**executor_options(kinesalite, zookeeper, stream), "zookeeper": proxy.hosts,
                   "checkpointIntervalS": "1"}
        reader = ExecutorStreamReader(options)
        try:
            start = reader.initialOffset()
            start, _, _ = one_batch(reader, start)  # the backlog: every shard has records
            counts, busy_tasks, idle_tasks = [], 0, 0
            for round_no in range(ROUNDS):  # caught up: records on a few shards only between batches
                placed = kinesalite.put(stream, [f"r{round_no}-{i}".encode() for i in range(5 * BUSY)],
                                        [k for on_shard in keys for k in on_shard[round_no * 5:(round_no + 1) * 5]])
                before = requests(proxy)
                start, parts, ids = one_batch(reader, start)
                after = requests(proxy)
                counts.append((after[0] - before[0], after[1] - before[1]))
                assert sorted(ids) == sorted(message_ids(placed))  # every new record once, nothing else
                assert len(parts) == 1, f"{BUSY} shards with new records: one task, got {parts}"
                busy_tasks += sum(1 for p in parts for s in p.shard_ids if s in busy)
                idle_tasks += sum(1 for p in parts for s in p.shard_ids if s not in busy)
            planned = PlannedBatch.parse(start)
            assert set(planned.starts) == set(shard_ids)  # the idle shards stay in the offset, at their ends
            assert planned.idle == set(shard_ids) - set(busy)
            # a shard idle for all those batches wakes up: its records come in a batch, each once (Spark asks again
            # while none is planned: the probes of a long idle shard come up to maxEmptyRecordBackoffS apart); the
            # busy shards, read up to their tip with records, get one more task each before they are probed again
            woken = kinesalite.put(stream, [f"wake-{i}".encode() for i in range(5)],
                                   keys_on(client, stream, shard_ids[-1], 5))
            read: list[str] = []
            tasked: list[str] = []

            def woken_read() -> bool:
                nonlocal start
                if reader.latestOffset(start, ReadAllAvailable()) != start:
                    start, parts, ids = one_batch(reader, start)
                    read.extend(ids)
                    tasked.extend(s for p in parts for s in p.shard_ids)
                return len(read) >= len(woken)

            assert wait_until(woken_read, 30), f"the woken shard's records were never all read: {read}"
            assert sorted(read) == sorted(message_ids(woken))
            assert sorted(tasked) == sorted([*busy, shard_ids[-1]]), f"tasks after the woken shard's put: {tasked}"
        finally:
            reader.stop()
            WORKER_CLIENTS.checkpoints(reader.config).close()  # the tasks' session, on the proxy closed next
    bound = PER_BATCH + PER_TASK
    assert idle_tasks == 0, \
        f"idle shards got {idle_tasks} tasks in {ROUNDS} caught-up batches (ZooKeeper requests: {counts})"
    assert busy_tasks == ROUNDS * BUSY
    assert max(n for n, _ in counts) <= bound, \
        f"ZooKeeper requests (not transactions, transactions) per caught-up batch: {counts}, expected at most {bound}"
    assert max(t for _, t in counts) <= TRANSACTIONS, f"ZooKeeper transactions per caught-up batch: {counts}"


def test_checkpoints_the_driver_wrote_before_go_in_one_transaction_that_never_overwrites_another_writer(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=1)
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        config, _ = parse_source_options({**executor_options(kinesalite, zookeeper, stream), "zookeeper": proxy.hosts})
        planning = QueryPlanning(config)
        other = ZooKeeperCheckpointStore.from_config(parse_source_options(executor_options(
            kinesalite, zookeeper, stream))[0])
        other.open()
        try:
            planning.save({"a": after("100"), "b": after("100")}, force=True)  # first writes: one by one
            before = proxy.requests()
            planning.save({"a": after("200"), "b": after("200")}, force=True)
            sent = {op: n - before.get(op, 0) for op, n in proxy.requests().items() if n != before.get(op, 0)}
            assert sent == {Op.MULTI: 1}, f"two checkpoints written before took {sent}"
            assert [other.load(s).sequence_number for s in "ab"] == ["200", "200"]
            other.save(Checkpoint("a", "900"))  # another writer moves a on: the next transaction must not apply
            planning.save({"a": after("300"), "b": after("300")}, force=True)
            assert [other.load(s).sequence_number for s in "ab"] == ["900", "300"]
            planning.save({"a": after("400"), "b": after("400")}, force=True)  # versions learned again
            assert [other.load(s).sequence_number for s in "ab"] == ["900", "400"]
        finally:
            planning.close()
            other.close()
