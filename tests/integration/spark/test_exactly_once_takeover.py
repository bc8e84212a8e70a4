"""An exactly-once SpoutPipeline whose batch log another pipeline of the same app took over between two attempts of
a txid: it must not call ``process()`` again, and its run ends with OwnershipLost.

The second pipeline is what a user can start by mistake: the same app, stream, state and batch log, but another
ZooKeeper prefix (another deployment's settings), so that the ZooKeeper ownership does not keep it out and only the
batch log can tell. The takeover is forced between the check that follows a failed attempt and the next attempt:
from the first pipeline's ``until()``, which the run asks while it waits for the retry (on the run thread), and
which waits there until the second pipeline rewrote the batch log. Real servers (kinesalite, ZooKeeper, Redis) and
the shared local Spark session, with the fixtures of :mod:`.test_exactly_once_ownership`.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

from kinesis_spout import RetryBackoff
from kinesis_spout.spark import SpoutPipeline
from kinesis_spout.state.txlog import OwnershipLost
from kinesis_spout.testing.process import wait_until

from .test_exactly_once_ownership import EXPECTED, Fixture, Runner

pytestmark = pytest.mark.slow


def log_owner(fx: Fixture) -> str | None:
    """Who last wrote the batch log of ``fx``'s app and stream, as the log says."""
    log = fx.log_map.make_backing_map()
    try:
        [doc] = log.multi_get([("$batch-log", "owned", fx.stream)])
    finally:
        log.close()
    return None if doc is None else str(doc["owner"])


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
            other = SpoutPipeline(spark, fx.config(zookeeper_prefix=f"{zookeeper.prefix}/another-deployment"),
                                  fx.count, trigger_interval_s=0.0, max_batch_records=7, exactly_once=fx.log_map)
            second.append(Runner(other, until=fx.all_counted, timeout_s=180))
            assert wait_until(lambda: log_owner(fx) != owner or not second[0].is_alive(), 120), \
                "the second pipeline never took the batch log over"
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
