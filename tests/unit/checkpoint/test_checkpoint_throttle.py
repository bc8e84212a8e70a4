"""The checkpoint throttle that the spout's checkpoint writer and the Spark source's planning share."""

from __future__ import annotations

import math

from kinesis_spout.checkpoint.throttle import CheckpointThrottle


def test_a_shard_never_written_is_due_at_once() -> None:
    throttle = CheckpointThrottle(5.0)
    assert throttle.due("shard-0", 0.0) and throttle.due("shard-0", -1e12)
    assert throttle.wait_s("shard-0", 100.0) == -math.inf


def test_after_a_write_the_shard_is_due_again_interval_s_later_and_the_others_are_not_held_back() -> None:
    throttle = CheckpointThrottle(5.0)
    throttle.wrote("shard-0", 100.0)
    assert [throttle.due("shard-0", t) for t in (100.0, 104.9, 105.0, 250.0)] == [False, False, True, True]
    assert [throttle.wait_s("shard-0", t) for t in (100.0, 103.5, 105.0, 106.0)] == [5.0, 1.5, 0.0, -1.0]
    assert throttle.due("shard-1", 100.0), "each shard has its own interval"
    throttle.wrote("shard-0", 105.0)
    assert not throttle.due("shard-0", 109.0) and throttle.wait_s("shard-0", 109.0) == 1.0


def test_an_interval_of_zero_lets_every_write_through() -> None:
    throttle = CheckpointThrottle(0.0)
    throttle.wrote("shard-0", 100.0)
    assert throttle.due("shard-0", 100.0) and throttle.wait_s("shard-0", 100.0) == 0.0
    assert throttle.interval_s == 0.0
