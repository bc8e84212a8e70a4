"""How a task waits on a fan-out subscription (WaitingFanOut): no lost wake-up, retries, the deadline.

The getter here is scripted so that an event arrives exactly in the window that matters (after the queue was found
empty, before the wait); the subscriptions themselves are tested against kinesis-local in
tests/integration/spark/test_fanout_source.py and tests/integration/spout/test_fanout*.py.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.retrieval.fanout import WaitingFanOut
from kinesis_spout.kinesis.retrieval.polling import FetchResult
from kinesis_spout.records import Record, SequenceKey

NOTHING_YET = FetchResult([], None, False, 0)
EVENT = FetchResult([], 1000, False, 0)  # an event without records, behind the tip


class ScriptedGetter:
    """Stands for a FanOutGetter: each ``fetch()`` runs the next step of ``script`` (a FetchResult to return, an
    error to raise, or a callable run first, e.g. the subscription's thread queuing an event)."""

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.shard_id = "shardId-000000000000"
        self.on_pending: Callable[[], None] = lambda: None
        self.fetches = 0
        self.prepared = 0
        self.closed = 0

    def prepare(self) -> None:
        self.prepared += 1
        step = self.script.pop(0) if self.script and isinstance(self.script[0], KinesisError) else None
        if step is not None:
            raise step

    def fetch(self) -> FetchResult:
        self.fetches += 1
        step = self.script.pop(0)
        if callable(step):
            step = step(self)
        if isinstance(step, KinesisError):
            raise step
        assert isinstance(step, tuple)
        return step

    def close(self) -> None:
        self.closed += 1


def waiting(getter: ScriptedGetter) -> WaitingFanOut:
    return WaitingFanOut(getter, max_retries=3)  # type: ignore[arg-type]


def in_thread(call: Callable[[], Any], join_s: float = 20.0) -> list[Any]:
    """Run ``call`` on a thread; its result, or nothing when it did not return within ``join_s``."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    thread.join(join_s)
    return out


def test_an_event_queued_between_the_look_and_the_wait_wakes_the_wait() -> None:
    def queued_after_the_look(getter: ScriptedGetter) -> FetchResult:
        getter.on_pending()  # the subscription's thread queues an event just after the queue was found empty
        return NOTHING_YET

    getter = ScriptedGetter([queued_after_the_look, EVENT])
    got = in_thread(lambda: waiting(getter).fetch(time.monotonic() + 600))
    assert got == [EVENT], "the wake-up was lost: the wait ran on towards its 600 s deadline"


def test_no_event_by_the_deadline_returns_nothing_yet() -> None:
    getter = ScriptedGetter([NOTHING_YET, NOTHING_YET, NOTHING_YET])
    assert waiting(getter).fetch(time.monotonic() + 0.05) == NOTHING_YET


def test_a_refused_subscription_is_tried_again_and_a_lasting_refusal_is_raised() -> None:
    busy = KinesisError("ResourceInUseException: another subscription", code="ResourceInUseException",
                        retriable=True)
    getter = ScriptedGetter([busy])
    fan = waiting(getter)
    before = time.monotonic()
    assert fan.subscribe() >= before + 1.0  # accepted at the second try, a second later
    assert getter.prepared == 2
    denied = KinesisError("access denied", code="AccessDeniedException", retriable=False)
    with pytest.raises(KinesisError, match="access denied"):
        waiting(ScriptedGetter([denied])).subscribe()


def test_an_error_after_records_were_handed_out_ends_the_wait_at_the_deadline_with_what_is_held() -> None:
    record = Record("shardId-0", "1", None, "k", b"x", None, SequenceKey(1, 0))
    lost = KinesisError("connection lost", code="ConnectionError", retriable=True)
    getter = ScriptedGetter([FetchResult([record], 500, False, 1), lost, EVENT])
    fan = waiting(getter)
    assert fan.fetch(time.monotonic() + 5).records == [record]
    # the retry's pause (a second at least) would pass the deadline: the task keeps what it has, and the wait ends
    # at the deadline, not sooner (a caller reading until its deadline would otherwise subscribe again at once)
    deadline = time.monotonic() + 0.3
    assert fan.fetch(deadline) == NOTHING_YET
    assert time.monotonic() >= deadline
    assert getter.script == [EVENT]  # not fetched again


def test_an_error_before_any_record_is_retried_even_past_the_deadline() -> None:
    lost = KinesisError("connection lost", code="ConnectionError", retriable=True)
    getter = ScriptedGetter([lost, EVENT])
    assert waiting(getter).fetch(time.monotonic() + 0.1) == EVENT
