"""Packing user records into aggregates by shard: every user record of an aggregate belongs to the shard the
aggregate is routed to, aggregates keep within the limit, order is kept per shard, and a record too large for an
aggregate goes plain."""

from __future__ import annotations

from kinesis_spout.kinesis.aggregation import deaggregate, hash_key
from kinesis_spout.kinesis.shards import HashKeyRange, Shard
from kinesis_spout.kinesis.writing.aggregate_writer import pack
from kinesis_spout.kinesis.writing.putter import PutEntry
from kinesis_spout.kinesis.writing.routing import MAX_HASH_KEY, ShardMap

QUARTER = 2 ** 126
SHARDS = [Shard(f"shardId-{n:012d}", None, None, "0", None, HashKeyRange(n * QUARTER, (n + 1) * QUARTER - 1))
          for n in range(4)]


def test_each_aggregate_holds_only_user_records_of_its_shard_and_routes_there() -> None:
    shard_map = ShardMap("s", SHARDS)
    entries = [(i, PutEntry(b"%d" % i * 50, f"pk-{i % 40}")) for i in range(2000)]
    # records right at the shards' boundaries, by explicit hash key
    entries += [(10_000 + n, PutEntry(b"edge", "e", str(n * QUARTER + d))) for n in range(4) for d in (-1, 0)
                if n * QUARTER + d >= 0]
    packed = pack(entries, shard_map, limit=20_000)
    seen: list[int] = []
    for (shard_id, members), outer in packed:
        assert outer.size <= 20_000
        assert shard_map.shard_for(int(outer.explicit_hash_key or 0)) == shard_id, "the aggregate routes to its shard"
        users = deaggregate(outer.data)
        assert users is not None and len(users) == len(members)
        for (item, entry, key), user in zip(members, users):
            assert key == hash_key(user.partition_key, user.explicit_hash_key)
            assert shard_map.holds(shard_id, key), f"user record {item} packed for a shard that does not serve it"
            assert user.data == entry.data
        seen += [m[0] for m in members]
    assert sorted(seen) == sorted(i for i, _ in entries)
    by_shard: dict[str, list[int]] = {}
    for (shard_id, members), _ in packed:
        by_shard.setdefault(shard_id, []).extend(m[0] for m in members if m[0] < 10_000)
    for order in by_shard.values():
        assert order == sorted(order), "order kept within a shard"


def test_a_user_record_too_large_for_an_aggregate_is_put_plain() -> None:
    shard_map = ShardMap("s", SHARDS)
    big = PutEntry(b"x" * ((1 << 20) - 10), "k")
    packed = pack([(0, PutEntry(b"a", "k")), (1, big), (2, PutEntry(b"b", "k"))], shard_map)
    assert [[m[0] for m in members] for (_, members), _ in packed] == [[0], [1], [2]]
    assert packed[1][1] == big and packed[1][0][0] == shard_map.shard_for(hash_key("k", None) or 0)
    assert MAX_HASH_KEY == SHARDS[-1].hash_range.end  # type: ignore[union-attr]
