"""How the driver packs a batch's shards into partitions (pure logic): whole shards, in order, within both limits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinesis_spout.spark.source.packing import pack


def test_shards_share_a_partition_while_the_records_fit() -> None:
    items = [("a", 40, 1), ("b", 40, 1), ("c", 40, 1), ("d", 10, 1)]
    assert pack(items, max_records=100) == [["a", "b"], ["c", "d"]]


def test_a_shard_over_the_limit_is_a_partition_alone_and_never_split() -> None:
    items = [("a", 10, 1), ("b", 500, 1), ("c", 10, 1)]
    assert pack(items, max_records=100) == [["a"], ["b"], ["c"]]


def test_the_byte_limit_closes_a_partition_too() -> None:
    items = [("a", 1, 60), ("b", 1, 60), ("c", 1, 30)]
    assert pack(items, max_records=1000, max_bytes=100) == [["a"], ["b", "c"]]


def test_limits_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        pack([("a", 1, 1)], max_records=0)


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 3000)), max_size=40), st.integers(1, 400),
       st.integers(1, 4000))
def test_every_shard_once_in_order_each_run_within_limits_and_no_two_neighbours_fit_together(
        sizes: list[tuple[int, int]], max_records: int, max_bytes: int) -> None:
    items = [(i, n, b) for i, (n, b) in enumerate(sizes)]
    runs = pack(items, max_records, max_bytes)
    assert [k for run in runs for k in run] == list(range(len(items)))
    assert all(run for run in runs)
    totals = [(sum(sizes[k][0] for k in run), sum(sizes[k][1] for k in run)) for run in runs]
    for run, (n, b) in zip(runs, totals):
        assert len(run) == 1 or (n <= max_records and b <= max_bytes)
    # greedy: the next run's first shard did not fit into the run before it
    for nxt, (n, b) in zip(runs[1:], totals):
        first_n, first_b = sizes[nxt[0]]
        assert n + first_n > max_records or b + first_b > max_bytes
