"""The pipelines' trigger pace (``RunLoop.batches``, both runners' loop): what is yielded, when the next batch is
collected, and when the run ends. No Spark and no servers; a trigger of 0 or of an hour, so nothing waits on the
clock but the run's own stop."""

from __future__ import annotations

import threading
import time

from kinesis_spout.spark.pipeline.loop import RunLoop
from kinesis_spout.spark.pipeline.metrics import MetricsRecorder


def test_nothing_collected_is_not_a_batch_and_each_batch_comes_with_its_start() -> None:
    loop = RunLoop(MetricsRecorder(), threading.Event(), lambda: 0, None, max_batches=2, deadline=None)
    script = [(None, 0.0), ("a", 1.0), (None, 0.0), ("b", 2.0), ("never", 3.0)]
    got = []
    for batch, started in loop.batches(lambda: script.pop(0), 0.0):
        got.append((batch, started))
        loop.processed += 1
    assert got == [("a", 1.0), ("b", 2.0)]
    assert script == [("never", 3.0)], "the run ended at max_batches without collecting again"


def test_the_next_batch_waits_for_the_trigger_counted_from_the_last_batch_s_start_and_a_stop_ends_the_wait() -> None:
    stop = threading.Event()
    loop = RunLoop(MetricsRecorder(), stop, lambda: 0, None, max_batches=None, deadline=None)
    calls: list[float] = []
    collected = threading.Event()

    def collect() -> tuple[str | None, float]:
        calls.append(time.monotonic())
        collected.set()
        return "batch", time.monotonic()

    ended = threading.Event()

    def run() -> None:
        for _ in loop.batches(collect, 3600.0):
            pass
        ended.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert collected.wait(30.0)
    assert not ended.wait(0.5) and len(calls) == 1, "the second batch waits for the hour-long trigger"
    stop.set()
    assert ended.wait(30.0) and len(calls) == 1, "a stop ends the wait without collecting again"


def test_an_empty_collect_does_not_move_the_trigger() -> None:
    loop = RunLoop(MetricsRecorder(), threading.Event(), lambda: 0, None, max_batches=None, deadline=None)
    script: list[tuple[str | None, float]] = [(None, 0.0)] * 5 + [("a", 1.0)]
    batches = loop.batches(lambda: script.pop(0), 3600.0)
    assert next(batches) == ("a", 1.0), "empty collects come one after another, no trigger between them"
