"""Exactly-once SpoutPipelines own their app and stream: a second one is refused, and one that lost its ownership
stops before it writes its batch log or state, and acks nothing.

Real servers (kinesalite, ZooKeeper, Redis) and the shared local Spark session. Word counts go into a
TransactionalMap on Redis; the batch log lives in Redis too. Interleavings are forced: a ``process()`` that waits on
an event, the ZooKeeper fault proxy (a cut that keeps the first pipeline away until its session expired), and a
write of the batch log made under a running pipeline.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest

from kinesis_spout.errors import SpoutError
from kinesis_spout.spark import SpoutPipeline
from kinesis_spout.state.txlog import OwnershipLost
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.zkproxy import Op, ZooKeeperFaultProxy

from .ownership import EXPECTED, Fixture, Runner

pytestmark = pytest.mark.slow


def pausing(fx: Fixture, at_txid: int, paused: threading.Event, resume: threading.Event,
            seen: list[int], run_ids: set[str] | None = None) -> Callable[[Any, Any], None]:
    """A process() that counts its batch, then (once, at ``at_txid``) waits until ``resume`` is set."""

    def process(df: Any, batch: Any) -> None:
        seen.append(batch.id)
        if run_ids is not None:
            run_ids.add(batch.run_id)
        fx.count(df, batch)
        if batch.id == at_txid and not resume.is_set():
            paused.set()
            assert resume.wait(90), "the test never resumed the paused pipeline"

    return process


def test_a_second_exactly_once_pipeline_of_the_app_is_refused_at_run_and_nothing_is_lost(
        spark: Any, kinesalite: Any, zookeeper: Any, redis: Any) -> None:
    """A rolling redeploy: the new driver (another batch size) starts while the old one is mid-batch."""
    fx = Fixture(kinesalite, zookeeper, redis)
    paused, resume = threading.Event(), threading.Event()
    seen_first: list[int] = []
    seen_second: list[int] = []
    first = SpoutPipeline(spark, fx.config(), pausing(fx, 2, paused, resume, seen_first), trigger_interval_s=0.0,
                          max_batch_records=20, exactly_once=fx.log_map)
    runner = Runner(first, until=fx.all_counted, timeout_s=150)
    try:
        assert paused.wait(90), f"the first pipeline did not reach txid 2: {runner.error!r}"

        def second_process(df: Any, batch: Any) -> None:
            seen_second.append(batch.id)
            fx.count(df, batch)

        second = SpoutPipeline(spark, fx.config(), second_process, trigger_interval_s=0.0, max_batch_records=7,
                               exactly_once=fx.log_map)
        with pytest.raises(SpoutError, match=r"owned by pid \d+ on host .* stop that pipeline first"):
            second.run(until=fx.all_counted, timeout_s=60)
        assert seen_second == [], "the refused pipeline must not process anything"
    finally:
        resume.set()
    assert runner.result(150) is None
    assert fx.counted() == EXPECTED, "every record counted exactly once"


def test_a_pipeline_whose_session_expired_and_was_taken_over_stops_before_writing_and_acks_nothing(
        spark: Any, kinesalite: Any, zookeeper: Any, redis: Any) -> None:
    """The first pipeline is cut off from ZooKeeper mid-batch until its session expired; a second one takes over
    and counts everything. When the first comes back it learns its session was lost and stops: its run() ends
    with the error, it writes neither the batch log nor state, and it acks nothing."""
    fx = Fixture(kinesalite, zookeeper, redis)
    paused, resume = threading.Event(), threading.Event()
    seen_first: list[int] = []
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        store, first = fx.behind(spark, proxy, pausing(fx, 1, paused, resume, seen_first))
        runner = Runner(first, until=resume.is_set, timeout_s=150)
        try:
            assert paused.wait(90), f"the first pipeline did not reach txid 1: {runner.error!r}"
            proxy.cut(Op.PING, hold=True)  # away from ZooKeeper, and kept away, until its session expires
            proxy.wait_acted()
            second = SpoutPipeline(spark, fx.config(), fx.count, trigger_interval_s=0.0, max_batch_records=7,
                                   exactly_once=fx.log_map)
            second.run(until=fx.all_counted, timeout_s=90)  # waits for the first one's session to expire
            assert fx.counted() == EXPECTED
            before = fx.stored()
            proxy.release()
            assert wait_until(lambda: store.session_losses >= 1, 30), "the first pipeline never saw its session lost"
        finally:
            resume.set()
        error = runner.result(60)
    assert error is not None and "lost its ownership" in str(error), f"run() must end with the error: {error!r}"
    assert seen_first == [1], "no batch after the ownership was lost"
    assert first.metrics.acked == 0, "nothing acked by a pipeline that lost its ownership"
    assert fx.stored() == before, "neither the batch log nor the state written after the ownership was lost"
    assert fx.counted() == EXPECTED


def test_a_batch_log_written_under_a_running_pipeline_stops_it_before_the_commit_and_a_restart_resumes(
        spark: Any, kinesalite: Any, zookeeper: Any, redis: Any) -> None:
    """Another writer changes the batch log while the pipeline is in ``process()`` (the pipeline's ZooKeeper
    session is fine, so only the log's compare-and-set can tell): the commit is refused, nothing is acked, and the
    run ends with the error. A restart replays the open txid and counts everything exactly once, in the same run
    of the batch log (``batch.run_id``)."""
    fx = Fixture(kinesalite, zookeeper, redis)
    paused, resume = threading.Event(), threading.Event()
    seen: list[int] = []
    first_runs: set[str] = set()
    first = SpoutPipeline(spark, fx.config(), pausing(fx, 2, paused, resume, seen, first_runs),
                          trigger_interval_s=0.0,
                          max_batch_records=20, exactly_once=fx.log_map)
    runner = Runner(first, until=resume.is_set, timeout_s=150)
    try:
        assert paused.wait(90), f"the pipeline did not reach txid 2: {runner.error!r}"
        log = fx.log_map.make_backing_map()
        try:
            key = ("$batch-log", "owned", fx.stream)
            [doc] = log.multi_get([key])
            assert doc is not None and doc["txid"] == 2 and doc["committed"] is False
            log.multi_put([key], [{**doc, "owner": "another pipeline"}])
        finally:
            log.close()
        acked_before = first.metrics.acked
        before = fx.stored()
    finally:
        resume.set()
    error = runner.result(60)
    assert error is not None and "lost its ownership" in str(error), f"run() must end with the error: {error!r}"
    assert seen == [1, 2]
    assert first.metrics.acked == acked_before, "txid 2 must not be acked"
    assert fx.stored() == before, "the batch log written by the other writer stays as it is"
    restarted_runs: set[str] = set()

    def count_again(df: Any, batch: Any) -> None:
        restarted_runs.add(batch.run_id)
        fx.count(df, batch)

    restarted = SpoutPipeline(spark, fx.config(), count_again, trigger_interval_s=0.0, max_batch_records=20,
                              exactly_once=fx.log_map)
    restarted.run(until=fx.all_counted, timeout_s=90)
    assert fx.counted() == EXPECTED
    assert len(first_runs) == 1 and restarted_runs == first_runs and all(first_runs), \
        "a restart that resumes the batch log is the same run"


def test_a_pipeline_whose_session_expired_stops_even_when_nobody_took_over(
        spark: Any, kinesalite: Any, zookeeper: Any, redis: Any) -> None:
    """Its ZooKeeper session expired mid-batch and nobody owns the stream now: the pipeline cannot know that
    nobody will, so it stops all the same, before its commit; a restart replays the open txid."""
    fx = Fixture(kinesalite, zookeeper, redis)
    paused, resume = threading.Event(), threading.Event()
    seen: list[int] = []
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        store, first = fx.behind(spark, proxy, pausing(fx, 1, paused, resume, seen))
        runner = Runner(first, until=resume.is_set, timeout_s=150)
        try:
            assert paused.wait(90), f"the pipeline did not reach txid 1: {runner.error!r}"
            watcher = zookeeper.client()
            assert watcher.exists(fx.owner_node) is not None
            proxy.cut(Op.PING, hold=True)
            proxy.wait_acted()
            assert wait_until(lambda: watcher.exists(fx.owner_node) is None, 30), "the session never expired"
            proxy.release()
            assert wait_until(lambda: store.session_losses >= 1, 30), "the pipeline never saw its session lost"
            before = fx.stored()
        finally:
            resume.set()
        error = runner.result(60)
    assert error is not None and "its ZooKeeper session ended" in str(error), f"run() must end so: {error!r}"
    assert first.metrics.acked == 0 and seen == [1]
    assert fx.stored() == before, "the commit of txid 1 is not written"
    fx.restart_counts_everything(spark)


def test_a_pipeline_taken_over_while_cut_off_ends_with_the_loss_and_calls_process_no_more(
        spark: Any, kinesalite: Any, zookeeper: Any, redis: Any) -> None:
    """The first pipeline is cut off from ZooKeeper inside ``process()`` of txid 1 (before its state write) and
    stays cut off: kazoo never reports the session LOST. A second pipeline takes over and counts everything. When
    the first resumes, its state write is refused (newer txids were applied); it must not process the txid again:
    its run() ends with OwnershipLost, and what the second one stored stays as it is."""
    fx = Fixture(kinesalite, zookeeper, redis)
    paused, resume = threading.Event(), threading.Event()
    seen: list[tuple[int, int]] = []

    def process(df: Any, batch: Any) -> None:
        seen.append((batch.id, batch.attempt))
        if batch.id == 1 and not resume.is_set():
            paused.set()
            assert resume.wait(90), "the test never resumed the paused pipeline"
        fx.count(df, batch)  # the state write comes after the pause

    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        store, first = fx.behind(spark, proxy, process, retry_limit=2)
        runner = Runner(first, until=lambda: False, timeout_s=150)
        try:
            assert paused.wait(90), f"the first pipeline did not reach txid 1: {runner.error!r}"
            proxy.cut(Op.PING, hold=True)  # cut off, and kept so until the end of the test
            proxy.wait_acted()
            second = SpoutPipeline(spark, fx.config(), fx.count, trigger_interval_s=0.0, max_batch_records=7,
                                   exactly_once=fx.log_map)
            second.run(until=fx.all_counted, timeout_s=90)
            assert fx.counted() == EXPECTED
            before = fx.stored()
            seen_at_takeover = list(seen)
        finally:
            resume.set()
        error = runner.result(120)
        assert store.session_losses == 0, "the first pipeline was still cut off (no LOST seen)"
    assert isinstance(error, OwnershipLost) and "lost its ownership" in str(error), f"run() ended so: {error!r}"
    assert seen_at_takeover == [(1, 1)] and seen == [(1, 1)], "process() called again after the takeover"
    assert first.metrics.acked == 0
    assert fx.stored() == before and fx.counted() == EXPECTED


def test_a_pipeline_cut_off_longer_than_its_session_timeout_stops_by_its_own_clock(
        spark: Any, kinesalite: Any, zookeeper: Any, redis: Any) -> None:
    """Cut off from ZooKeeper mid-batch until its session expired, and still cut off (so kazoo never reports
    LOST), with nobody taking over: the batch log's compare-and-set cannot tell, but the pipeline knows by its own
    clock that its session may be gone. It ends with OwnershipLost before its commit; a restart replays the txid."""
    fx = Fixture(kinesalite, zookeeper, redis)
    paused, resume = threading.Event(), threading.Event()
    seen: list[int] = []
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        store, first = fx.behind(spark, proxy, pausing(fx, 1, paused, resume, seen))
        runner = Runner(first, until=resume.is_set, timeout_s=150)
        try:
            assert paused.wait(90), f"the pipeline did not reach txid 1: {runner.error!r}"
            watcher = zookeeper.client()
            proxy.cut(Op.PING, hold=True)
            proxy.wait_acted()
            assert wait_until(lambda: watcher.exists(fx.owner_node) is None, 30), "the session never expired"
            before = fx.stored()
        finally:
            resume.set()
        error = runner.result(60)
        assert store.session_losses == 0, "the pipeline was still cut off (no LOST seen)"
    assert isinstance(error, OwnershipLost) and "cut off from ZooKeeper" in str(error), f"run() ended so: {error!r}"
    assert first.metrics.acked == 0 and seen == [1]
    assert fx.stored() == before, "the commit of txid 1 is not written"
    fx.restart_counts_everything(spark)


def test_a_batch_log_written_during_a_failed_attempt_stops_the_pipeline_before_it_processes_again(
        spark: Any, kinesalite: Any, zookeeper: Any, redis: Any) -> None:
    """Another writer changes the batch log while the pipeline's attempt of txid 2 fails (its ZooKeeper session
    is fine): the pipeline reads the log before the next attempt and ends with OwnershipLost instead of calling
    ``process()`` again."""
    fx = Fixture(kinesalite, zookeeper, redis)
    seen: list[tuple[int, int]] = []

    def process(df: Any, batch: Any) -> None:
        seen.append((batch.id, batch.attempt))
        if batch.id == 2:
            log = fx.log_map.make_backing_map()
            try:
                key = ("$batch-log", "owned", fx.stream)
                [doc] = log.multi_get([key])
                log.multi_put([key], [{**doc, "owner": "another pipeline"}])
            finally:
                log.close()
            raise RuntimeError("this attempt fails")
        fx.count(df, batch)

    first = SpoutPipeline(spark, fx.config(retry_limit=3), process, trigger_interval_s=0.0, max_batch_records=20,
                          exactly_once=fx.log_map)
    with pytest.raises(OwnershipLost, match=r"lost its ownership .* entry of another pipeline \(txid 2\); another "
                                            r"attempt of txid 2 \(attempt 1 failed\) is not done"):
        first.run(until=fx.all_counted, timeout_s=90)
    assert seen == [(1, 1), (2, 1)], "process() called again after the batch log was taken"
