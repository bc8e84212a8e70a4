"""The names a user imports from the package's top: each is the one the library raises or takes, not a copy."""

from __future__ import annotations

import kinesis_spout
from kinesis_spout import errors, retry


def test_retry_error_is_one_class_of_the_error_tree_importable_from_the_top_and_from_retry() -> None:
    assert kinesis_spout.RetryError is errors.RetryError is retry.RetryError
    assert issubclass(kinesis_spout.RetryError, kinesis_spout.SpoutError)
    assert "RetryError" in kinesis_spout.__all__ and "RetryError" in retry.__all__
    cause = OSError("connection refused")
    error = kinesis_spout.RetryError("put: gave up", last=cause, attempts=3, elapsed_s=1.5)
    assert (str(error), error.last, error.attempts, error.elapsed_s, error.retriable) == (
        "put: gave up", cause, 3, 1.5, False)


def test_the_config_groups_are_exported_from_the_top_and_are_the_types_of_a_configs_groups() -> None:
    from kinesis_spout import (
        DeadLetterSettings,
        KinesisSettings,
        MetricsSettings,
        ReadingSettings,
        SpoutConfig,
        TrackingSettings,
        WorkerSettings,
        ZooKeeperSettings,
    )

    config = SpoutConfig("orders", "billing")
    assert [type(getattr(config, group)) for group in ("kinesis", "reading", "tracking", "zk", "dead_letters",
                                                        "metrics", "worker")] == [
        KinesisSettings, ReadingSettings, TrackingSettings, ZooKeeperSettings, DeadLetterSettings, MetricsSettings,
        WorkerSettings]
    nested = SpoutConfig("orders", "billing", kinesis=KinesisSettings(region="eu-west-1"),
                         tracking=TrackingSettings(retry_limit=5),
                         zk=ZooKeeperSettings(hosts="zk1:2181", session_timeout_s=20))
    flat = SpoutConfig("orders", "billing", region="eu-west-1", retry_limit=5, zookeeper="zk1:2181",
                       zookeeper_session_timeout_s=20)
    assert (nested.kinesis, nested.tracking, nested.zk) == (flat.kinesis, flat.tracking, flat.zk)
    for name in ("KinesisSettings", "ReadingSettings", "TrackingSettings", "ZooKeeperSettings", "DeadLetterSettings",
                 "MetricsSettings", "WorkerSettings"):
        assert name in kinesis_spout.__all__, name


def test_inflight_record_tracker_is_the_library_s_one_tracker_and_takes_the_per_record_tracker_s_arguments() -> None:
    from kinesis_spout import FailOutcome, InflightRecordTracker, RetryBackoff, SequenceKey
    from kinesis_spout.tracker import SpanTracker
    from kinesis_spout.tracking.spans import SpanTracker as the_tracker

    assert InflightRecordTracker is SpanTracker is the_tracker
    assert "InflightRecordTracker" in kinesis_spout.__all__
    # every argument, keyword and key form the per-record tracker took
    tracker = InflightRecordTracker("shardId-000000000000", retry_limit=0, backoff=RetryBackoff(0.0, 1.0, 0.0),
                                    message_timeout_s=None, checkpoint=SequenceKey(100))
    assert tracker.emit(SequenceKey(101), 0.0, "a", 3) and tracker.emit(SequenceKey(102).rank, 0.0)
    assert tracker.emit_many([SequenceKey(103), SequenceKey(104)], 0.0, ["c", "d"], [1, 1]) == 0
    assert tracker.fail(SequenceKey(101), 1.0) is FailOutcome.DEAD_LETTER
    assert tracker.ack_many([SequenceKey(102).rank, SequenceKey(103)]) == 2 and tracker.ack(SequenceKey(104))
    assert tracker.checkpoint == SequenceKey(100)
    assert tracker.take_dead_letters() == [(SequenceKey(101), "a", 1)]
    assert tracker.dead_letter_written(SequenceKey(101))
    assert tracker.checkpoint == SequenceKey(104) and tracker.inflight_count == 0
    assert (tracker.retry_limit, tracker.message_timeout_s, tracker.backoff) == (0, None, RetryBackoff(0.0, 1.0, 0.0))
