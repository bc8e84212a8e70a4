"""The Spark source's driver reads poll an idle shard ever less often, up to ``maxEmptyRecordBackoffS``, and start
over once records come: the planner driven as Spark drives it, without Spark, on kinesalite."""

from __future__ import annotations

import time

from kinesis_spout import InitialPosition, SpoutConfig
from kinesis_spout.config import MIN_POLL_INTERVAL_S
from kinesis_spout.positions import Position
from kinesis_spout.spark.source.driver_planner import DriverPlanner
from kinesis_spout.spark.source.planning import QueryPlanning
from kinesis_spout.testing.kinesis import KinesisEndpoint

TIMEOUT_S = 10.0


class Rounds:
    """Planning rounds of one planner as Spark makes them, each once the shard is due: ``next`` returns (the end
    planned, and bounds low/high of the pause the planner set before the shard's next poll: its next poll time
    minus the time of the round). Rounds in which the shard is not due, or reads ahead, change nothing: the rounds
    wait for the shard's time and plan again."""

    def __init__(self, planner: DriverPlanner) -> None:
        self.planner = planner
        self.due: float | None = None  # the shard's next poll, as the last round planned it

    def next(self, positions: dict[str, Position]) -> tuple[dict[str, Position], float, float]:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            assert time.monotonic() < deadline, "no round polled the shard"
            self.planner.wait(max(0.0, (self.due or 0.0) - time.monotonic()))
            before = time.monotonic()
            end, _, wake = self.planner.plan(positions, None, None)
            after = time.monotonic()
            if end != positions:  # records planned: the shard reads ahead now
                self.due = None
                return end, float("nan"), float("nan")
            if wake is not None and wake != self.due:
                self.due = wake
                return end, wake - after, wake - before
            if wake is None:  # reading ahead: wait for it to finish
                self.planner.wait(MIN_POLL_INTERVAL_S)
            self.due = wake


def test_a_driver_read_idle_shard_is_polled_ever_less_often_up_to_its_cap_and_starts_over_after_records(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    shard = kinesalite.shard_ids(stream)[0]
    config = SpoutConfig(stream_name=stream, app_name="idle", endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2, max_empty_record_backoff_s=0.8)
    planner = DriverPlanner(QueryPlanning(config))
    rounds = Rounds(planner)
    positions = {shard: Position.parse("TRIM_HORIZON")}
    try:
        for expected in (0.2, 0.4, 0.8, 0.8):
            end, low, high = rounds.next(positions)
            assert end == positions
            assert low - 1e-9 <= expected <= high + 1e-9, f"paused {low:.3f}..{high:.3f} s, expected {expected}"
        kinesalite.put(stream, [b"one"], ["pk"])
        deadline = time.monotonic() + TIMEOUT_S
        end = positions
        while end == positions:  # read at the cap's pace at the latest
            assert time.monotonic() < deadline, "the record was not read"
            end, _, _ = rounds.next(positions)
        rounds.next(end)  # the read-ahead after the record found the tip: the first pause again (timed off-thread)
        again, low, high = rounds.next(end)  # the next empty read: twice the first pause, not the cap
        assert again == end and low - 1e-9 <= 0.4 <= high + 1e-9, f"paused {low:.3f}..{high:.3f} s, expected 0.4"
    finally:
        planner.close()
        planner.planning.close()
