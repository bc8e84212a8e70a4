"""An exactly-once SpoutPipeline whose batch log another pipeline of the same app took over before an attempt of a
txid (between two attempts, or while a restart reads its open txid again): it must not call ``process()``, and its
run ends with OwnershipLost.

The second pipeline is what a user can start by mistake: the same app, stream, state and batch log, but another
ZooKeeper prefix (another deployment's settings), so that the ZooKeeper ownership does not keep it out and only the
batch log can tell. The takeover is forced where the first pipeline has written nothing since its last check: from
the first pipeline's ``until()``, which its run asks on the run thread while it waits to try a txid again and while
it reads an open txid again, and which waits there until the second pipeline rewrote the batch log. Real servers
(kinesalite, ZooKeeper, Redis) and the shared local Spark session, with the fixtures of
:mod:`.test_exactly_once_ownership`.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

from kinesis_spout import RetryBackoff
from kinesis_spout.errors import BatchFailedError
from kinesis_spout.spark import SpoutPipeline
from kinesis_spout.state.txlog import OwnershipLost
from kinesis_spout.testing.process import wait_until

from .ownership import EXPECTED, Fixture, Runner

pytestmark = pytest.mark.slow


def log_owner(fx: Fixture) -> str | None:
    """Who last wrote the batch log of ``fx``'s app and stream, as the log says."""
    log = fx.log_map.make_backing_map()
    try:
        [doc] = log.multi_get([("$batch-log", "owned", fx.stream)])
    finally:
        log.close()
    return None if doc is None else str(doc["owner"])



def take_over(spark: Any, fx: Fixture, zookeeper: Any, owner: object) -> Runner:
    """Start a second pipeline of the app from another deployment's ZooKeeper prefix (which its ownership node does
    not keep out) and wait until it owns the batch log (``owner`` was the owner before): only the log tells."""
    other = SpoutPipeline(spark, fx.config(zookeeper_prefix=f"{zookeeper.prefix}/another-deployment"),
                          fx.count, trigger_interval_s=0.0, max_batch_records=7, exactly_once=fx.log_map)
    runner = Runner(other, until=fx.all_counted, timeout_s=180)
    assert wait_until(lambda: log_owner(fx) != owner or not runner.is_alive(), 120), \
        "the second pipeline never took the batch log over"
    return runner

def test_a_batch_log_taken_over_while_an_attempt_waits_for_its_retry_stops_the_pipeline_before_process(
        spark: Any, kinesalite: Any, zookeeper: Any, redis: Any) -> None:
    """Attempt 1 of txid 2 raises; while the first pipeline waits to try again, a second pipeline of the app
    (another ZooKeeper prefix) takes the batch log over, replays txid 2 and counts everything. The first one's
    next attempt is refused before ``process()``: its run ends with OwnershipLost, every record is counted once."""
    fx = Fixture(kinesalite, zookeeper, redis)
    seen: list[tuple[int, int]] = []
    failed = threading.Event()
    second: list[Runner] = []

    def process(df: Any, batch: Any) -> None:
        seen.append((batch.id, batch.attempt))
        if (batch.id, batch.attempt) == (2, 1):
            failed.set()
            raise RuntimeError("this attempt fails; the next one comes after the backoff")
        fx.count(df, batch)

    def until() -> bool:
        """Asked by the first pipeline's run, also while it waits to try txid 2 again: the second one starts then,
        and this waits until it took the batch log over."""
        if failed.is_set() and not second:
            owner = log_owner(fx)
            second.append(take_over(spark, fx, zookeeper, owner))
        return False

    first = SpoutPipeline(spark, fx.config(), process, trigger_interval_s=0.0, max_batch_records=20,
                          exactly_once=fx.log_map, batch_retry_backoff=RetryBackoff(initial_s=0.2, max_s=0.2))
    with pytest.raises(OwnershipLost) as lost:
        first.run(until=until, timeout_s=300)
    assert second, "txid 2 never failed"
    assert second[0].result(240) is None
    assert seen == [(1, 1), (2, 1)], "process() called again after the batch log was taken over"
    assert re.search(r"lost its ownership .* entry of .*; attempt 2 of txid 2 \(process\(\) and its state\) is not "
                     r"done", str(lost.value)), lost.value
    assert fx.counted() == EXPECTED, "every record counted exactly once"


def test_a_batch_log_taken_over_while_a_restart_reads_its_open_txid_again_stops_it_before_process(
        spark: Any, kinesalite: Any, zookeeper: Any, redis: Any) -> None:
    """A first run leaves txid 2 open (its only attempt raised). A restart takes the log over and reads txid 2's
    records again; meanwhile a second pipeline of the app (another ZooKeeper prefix) takes the log over in turn.
    The restart has written nothing since its takeover, so only the check before ``process()`` can tell: it must
    not process txid 2, and its run ends with OwnershipLost; every record is counted once."""
    fx = Fixture(kinesalite, zookeeper, redis)

    def fail_txid_2(df: Any, batch: Any) -> None:
        if batch.id == 2:
            raise RuntimeError("the first run leaves txid 2 open")
        fx.count(df, batch)

    crashed = SpoutPipeline(spark, fx.config(), fail_txid_2, trigger_interval_s=0.0, max_batch_records=20,
                            exactly_once=fx.log_map, batch_retry_limit=0)
    with pytest.raises(BatchFailedError):
        crashed.run(until=fx.all_counted, timeout_s=300)
    left_by = log_owner(fx)
    seen: list[tuple[int, int]] = []
    second: list[Runner] = []

    def process(df: Any, batch: Any) -> None:
        seen.append((batch.id, batch.attempt))
        fx.count(df, batch)

    def until() -> bool:
        """Asked by the restart's run, also while it reads txid 2 again: once the restart took the log over, the
        second pipeline starts, and this waits until it took the log over in turn."""
        owner = log_owner(fx)
        if owner != left_by and not second:
            second.append(take_over(spark, fx, zookeeper, owner))
        return False

    restarted = SpoutPipeline(spark, fx.config(), process, trigger_interval_s=0.0, max_batch_records=20,
                              exactly_once=fx.log_map)
    with pytest.raises(OwnershipLost) as lost:
        restarted.run(until=until, timeout_s=300)
    assert second, "the restart never read txid 2 again"
    assert second[0].result(240) is None
    assert seen == [], "process() called after the batch log was taken over"
    assert re.search(r"lost its ownership .* entry of .*; attempt 1 of txid 2 \(process\(\) and its state\) is not "
                     r"done", str(lost.value)), lost.value
    assert fx.counted() == EXPECTED, "every record counted exactly once"
