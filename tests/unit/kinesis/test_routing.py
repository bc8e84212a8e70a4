"""The hash key -> shard map of the aggregating writer: both ends of every range are the shard's own, closed shards
take no writes, and a listing that leaves hash keys uncovered is refused."""

from __future__ import annotations

import pytest

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.shards import HashKeyRange, Shard
from kinesis_spout.kinesis.writing.routing import MAX_HASH_KEY, ShardMap

HALF = 2 ** 127


def shard(n: int, start: int, end: int, closed: bool = False) -> Shard:
    return Shard(f"shardId-{n:012d}", None, None, "0", "9" if closed else None, HashKeyRange(start, end))


SPLIT = [shard(0, 0, MAX_HASH_KEY, closed=True), shard(2, HALF, HALF + 10),
         shard(1, 0, HALF - 1), shard(3, HALF + 11, MAX_HASH_KEY)]


@pytest.mark.parametrize(("key", "expected"), [
    (0, 1), (HALF - 1, 1), (HALF, 2), (HALF + 10, 2), (HALF + 11, 3), (MAX_HASH_KEY, 3), (12345, 1)])
def test_each_key_goes_to_the_open_shard_whose_inclusive_range_holds_it(key: int, expected: int) -> None:
    assert ShardMap("s", SPLIT).shard_for(key) == f"shardId-{expected:012d}"


def test_ranges_of_closed_shards_are_known_for_checking_where_a_put_landed() -> None:
    shard_map = ShardMap("s", SPLIT)
    assert shard_map.holds("shardId-000000000000", HALF + 20) is True
    assert shard_map.holds("shardId-000000000001", HALF) is False
    assert shard_map.holds("shardId-000000000002", HALF) is True
    assert shard_map.holds("shardId-000000000009", 0) is None
    assert shard_map.shard_ids == ("shardId-000000000001", "shardId-000000000002", "shardId-000000000003")


@pytest.mark.parametrize("shards", [
    [shard(1, 0, HALF - 1)],  # the top half missing
    [shard(1, 0, HALF - 1), shard(2, HALF + 1, MAX_HASH_KEY)],  # a gap of one key
    [shard(0, 0, MAX_HASH_KEY, closed=True)],  # nothing open
    [],
])
def test_a_listing_that_leaves_hash_keys_uncovered_is_refused(shards: list[Shard]) -> None:
    with pytest.raises(KinesisError, match="do not cover every hash key") as raised:
        ShardMap("s", shards)
    assert raised.value.retriable


def test_a_key_outside_128_bits_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        ShardMap("s", SPLIT).shard_for(MAX_HASH_KEY + 1)
