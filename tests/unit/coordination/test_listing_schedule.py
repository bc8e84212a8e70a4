"""The shard-listing interval that the spout's shard sync and the Spark source's planning share."""

from __future__ import annotations

from kinesis_spout.coordination.listing import ListingSchedule


def test_shards_never_listed_are_listed_at_once() -> None:
    assert ListingSchedule(60.0).due(0.0)


def test_a_listing_holds_for_interval_s_then_the_shards_are_listed_again() -> None:
    schedule = ListingSchedule(60.0)
    schedule.listed(1000.0)
    assert [schedule.due(t) for t in (1000.0, 1059.9, 1060.0, 5000.0)] == [False, False, True, True]
    schedule.listed(1060.0)
    assert not schedule.due(1119.0) and schedule.due(1120.0)
    assert schedule.interval_s == 60.0


def test_relist_makes_the_next_look_list_them_at_once() -> None:
    schedule = ListingSchedule(60.0)
    schedule.listed(1000.0)
    schedule.relist()
    assert schedule.due(1000.0)
    schedule.listed(1001.0)
    assert not schedule.due(1002.0), "a listing after relist holds for the interval again"
