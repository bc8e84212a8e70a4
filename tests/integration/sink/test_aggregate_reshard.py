"""The aggregating writer across a reshard, on kinesalite (which splits shards as Kinesis does): the shard is split
while the writer holds the old shard map, so its next aggregates land in the children; it lists the shards again
and puts again the user records the child they landed in does not serve. A reader that drops foreign user records
(as KCL and our spout do) then has every user record exactly once, each in a shard whose range holds its hash key;
aws-kinesis-agg's de-aggregator reads the same user records."""

from __future__ import annotations

import base64
from collections import Counter

from aws_kinesis_agg.deaggregator import iter_deaggregate_records

from kinesis_spout.kinesis.writing.aggregate_writer import AggregatingWriter
from kinesis_spout.kinesis.writing.putter import PutEntry, RecordPutter
from kinesis_spout.kinesis.writing.routing import ShardMap
from kinesis_spout.retry import RetryPolicy
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream

from .support import raw_records, read_with_spout, user_records_in_range


def test_user_records_put_with_a_stale_shard_map_after_a_split_end_up_once_in_their_shards(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=1)
    client = kinesalite.client()
    putter: RecordPutter = RecordPutter(stream, client, RetryPolicy(initial_s=0.01, deadline_s=10.0))
    writer: AggregatingWriter[int] = AggregatingWriter(putter, lambda: ShardMap.load(client, stream), limit=4096)
    first = [(i, PutEntry(b"before %d" % i, f"pk-{i}")) for i in range(200)]
    assert sorted(writer.put(first)) == list(range(200))
    client.split_shard(StreamName=stream, ShardToSplit=kinesalite.shard_ids(stream)[0],
                       NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    second = [(i, PutEntry(b"after %d" % i, f"pk-{i}", str(i * 2 ** 120 % 2 ** 128) if i % 10 == 0 else None))
              for i in range(200, 600)]
    assert sorted(writer.put(second)) == list(range(200, 600)), "each user record reported written once"
    expected = Counter((e.partition_key, e.explicit_hash_key, e.data) for _, e in first + second)

    delivered = user_records_in_range(kinesalite, stream)
    assert Counter((u.partition_key, u.explicit_hash_key, u.data) for _, u in delivered) == expected
    assert writer.refreshes == 1 and writer.replaced > 0
    children = {sid for sid, _ in delivered} - {kinesalite.shard_ids(stream)[0]}
    assert len(children) == 2, "both children got user records"

    theirs = Counter()
    for records in raw_records(kinesalite, stream).values():
        for r in iter_deaggregate_records([{**r, "Data": r["Data"]} for r in records], data_format="Boto3"):
            theirs[(r["kinesis"]["partitionKey"], base64.b64decode(r["kinesis"]["data"]))] += 1
    ours_pairs = Counter((e.partition_key, e.data) for _, e in first + second)
    assert set(theirs) == set(ours_pairs), "aws-kinesis-agg reads the same user records (foreign copies included)"

    spout = Counter((r.partition_key, r.data) for r in read_with_spout(kinesalite, stream, len(expected)))
    assert spout == ours_pairs, "the spout delivers every user record once"
