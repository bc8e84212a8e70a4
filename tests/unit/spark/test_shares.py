"""The batch shares of a limit in records alone, worked out by counting, are the shares ``allocate`` gives record by
record."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kinesis_spout.spark.source.offsets import allocate
from kinesis_spout.spark.source.shares import share_rows

SHARDS = [f"shardId-{i:012d}" for i in range(6)]


@given(st.lists(st.integers(0, 40), min_size=0, max_size=6), st.one_of(st.none(), st.integers(-2, 200)))
def test_shares_are_those_allocate_gives_with_no_byte_limit(lengths: list[int], max_records: int | None) -> None:
    waiting = dict(zip(SHARDS, lengths))
    expected = allocate({shard: [100] * n for shard, n in waiting.items()}, max_records, None)
    assert share_rows(waiting, max_records) == expected


def test_a_limit_cutting_a_round_serves_the_first_shards_in_order() -> None:
    assert share_rows({"a": 5, "b": 1, "c": 5}, 6) == {"a": 3, "b": 1, "c": 2}


def test_a_limit_below_one_still_admits_the_first_record() -> None:
    assert share_rows({"a": 0, "b": 3}, 0) == {"a": 0, "b": 1}


def test_no_limit_admits_every_waiting_record() -> None:
    assert share_rows({"a": 4, "b": 0}, None) == {"a": 4, "b": 0}
