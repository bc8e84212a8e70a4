"""Enhanced fan-out reading: one SubscribeToShard subscription per shard, seen by the readers as a shard getter.

:class:`FanOutGetter` is a :class:`~kinesis_spout.kinesis.retrieval.protocol.ShardRetrieval` whose ``fetch()``
takes the next event of its :class:`~kinesis_spout.kinesis.retrieval.subscribe_to_shard.Subscription` (one
SubscribeToShard call and the thread reading its reply) without blocking: the polling getter's record conversion
(:class:`~kinesis_spout.kinesis.retrieval.conversion.RecordConversion`: KPL de-aggregation, foreign user records),
the same ``position`` (after the last record handed out), the same ``FetchResult``. When a subscription ends it
subscribes again from ``position``, so events read from the connection but never handed out are read again, and
nothing handed out is. ``pushed`` tells the :class:`~kinesis_spout.kinesis.retrieval.reader.BufferedShardReader` to
park on an empty fetch and wait for ``on_pending`` (called by the subscription's thread) instead of polling. A
caught-up subscription of a closed shard asks ``end_probe`` (a polling getter of one record, given by the factory)
whether the shard was read to its end.

:class:`WaitingFanOut` is the same getter read by one Spark task that waits for its events and retries refusals.
``Subscription`` and ``starting_position`` are importable from here too.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.retrieval.conversion import ConvertedRecords, RecordConversion
from kinesis_spout.kinesis.retrieval.eventstream import SubscriptionEvent
from kinesis_spout.kinesis.retrieval.protocol import LATEST_MARGIN, FetchResult, ShardRetrieval
from kinesis_spout.kinesis.retrieval.read_retries import pause_after, read_backoff, read_succeeded
from kinesis_spout.kinesis.retrieval.subscribe_to_shard import Subscription, starting_position
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.positions import Kind, Position, after, at_timestamp
from kinesis_spout.retry import RetryPolicy

__all__ = ["DEFAULT_RENEW_S", "RESUBSCRIBE_S", "SUBSCRIBE_RETRY", "FanOutGetter", "Subscription", "WaitingFanOut",
           "starting_position"]

log = logging.getLogger(__name__)

#: Kinesis ends a subscription after 5 minutes; the getter renews it then at the latest.
DEFAULT_RENEW_S = 300.0
#: Kinesis refuses a new subscription of a consumer to a shard for about this long after the last one was accepted.
RESUBSCRIBE_S = 5.0
#: Retries of a refused or lost subscription by a task: a second apart at first (one SubscribeToShard a second per
#: consumer and shard), then longer, past ``RESUBSCRIBE_S`` by the third.
SUBSCRIBE_RETRY = RetryPolicy(initial_s=1.0, multiplier=2.0, max_s=10.0, jitter=0.5)


class FanOutGetter(ConvertedRecords):
    """Reads one shard through an enhanced fan-out subscription of ``consumer_arn`` (see the module docstring).

    Who calls: one :class:`~kinesis_spout.kinesis.retrieval.reader.BufferedShardReader` (``fetch``, ``prepare``,
    ``close``, ``pending``; it sets ``on_pending``). Not thread-safe beyond that: the reader's poll owns it; the
    subscription's thread only queues events and calls ``on_pending``. Counters: ``subscriptions`` (subscribe calls that
    succeeded), ``renewals`` (subscriptions that ended cleanly and were renewed), ``resubscribes`` (after an error).
    """

    pushed = True

    def __init__(self, client: Any, stream_name: str, shard_id: str, start: Position, consumer_arn: str, *,
                 renew_s: float = DEFAULT_RENEW_S, deaggregate: bool = False,
                 hash_range: HashKeyRange | None = None, end_probe_s: float | None = 10.0,
                 end_probe: Callable[[Position], ShardRetrieval] | None = None) -> None:
        if end_probe_s is not None and end_probe is None:
            raise ValueError(f"fan-out getter of {shard_id}: end_probe_s={end_probe_s} needs end_probe (a polling "
                             f"getter of one record from a position, made by "
                             f"kinesis_spout.kinesis.retrieval.factory); pass end_probe_s=None for a getter that "
                             f"never asks GetRecords whether its shard ended")
        self.client = client
        self.stream_name = stream_name
        self.shard_id = shard_id
        self.position = start
        self.shard_end = start.ended  # an end: nothing left to read
        self.expired_iterators = 0  # a subscription has no iterator to expire
        self._convert = RecordConversion(stream_name, shard_id, deaggregate=deaggregate, hash_range=hash_range)
        self.end_probe = end_probe  # a polling getter of one record from a position: asks whether the shard ended
        self.consumer_arn = consumer_arn
        self.renew_s = renew_s
        # a caught-up subscription asks at most this often whether its shard is closed and read to its end (kinesis-
        # mock never sends ChildShards, so its subscriptions never end a closed shard); None: never
        self.end_probe_s = end_probe_s
        self._next_probe = time.monotonic() + (end_probe_s or 0.0)
        self.end_probes = 0
        self.on_pending: Callable[[], None] = lambda: None
        self._sub: Subscription | None = None
        self.subscriptions = 0
        self.renewals = 0
        self.resubscribes = 0
        self.initial_responses = 0  # subscriptions whose stream began with an initial response (real Kinesis)

    @property
    def pending(self) -> bool:
        """True when ``fetch`` has work: no subscription yet, or one with an event, an end or an error queued. Read
        by any thread (the reader's room check) as a snapshot."""
        sub = self._sub
        return not self.shard_end and (sub is None or sub.pending)

    def prepare(self) -> None:
        """Subscribe now (a ``LATEST`` start is pinned to when ``open()`` runs)."""
        if self._sub is None and not self.shard_end:
            self._subscribe()

    def _subscribe(self) -> Subscription:
        pos = self.position
        asked_at = datetime.now(timezone.utc) - LATEST_MARGIN
        sub = Subscription(self.client, self.consumer_arn, self.shard_id, pos, renew_s=self.renew_s,
                           on_pending=self._pending)
        sub.open()
        if pos.kind is Kind.LATEST:  # as polling does: a renewal starts where this one did, not at a later tip
            self.position = at_timestamp(asked_at)
        self._sub = sub
        self.subscriptions += 1
        log.debug("subscribed %s to %s at %s", self.consumer_arn, self.shard_id, pos.describe())
        return sub

    def _pending(self) -> None:
        self.on_pending()

    def fetch(self) -> FetchResult:
        """The next event as a ``FetchResult`` without blocking (empty when none is there yet); subscribes when
        needed. Raises the ``KinesisError`` that refused or ended a subscription (the next call subscribes again
        from ``position``)."""
        if self.shard_end:
            return FetchResult([], 0, True, 0)
        sub = self._sub if self._sub is not None else self._subscribe()
        try:
            item = sub.take()
        except EOFError:  # renewal time, or Kinesis ended it: subscribe again from the last position handed out
            self._drop()
            self.renewals += 1
            self._subscribe()
            return FetchResult([], None, False, 0)
        if item is None:
            return FetchResult([], None, False, 0)
        if isinstance(item, KinesisError):
            self._drop()
            self.resubscribes += 1
            raise item
        if sub.initial_response and self.initial_responses < self.subscriptions:
            self.initial_responses = self.subscriptions
        return self._event(item)

    def _event(self, event: SubscriptionEvent) -> FetchResult:
        raw = event.records
        records = self._convert.records(raw)
        if raw:
            self.position = after(raw[-1]["SequenceNumber"])
        elif event.continuation is not None and self._before(int(event.continuation)):
            self.position = after(event.continuation)
        if event.shard_end or (not raw and event.millis_behind_latest == 0 and self._read_to_end()):
            self.shard_end = True
            self._drop()
        return FetchResult(records, event.millis_behind_latest, self.shard_end, len(raw))

    def _read_to_end(self) -> bool:
        """True when the shard is closed and nothing is left after ``position`` (GetRecords from there returns no
        record and no next iterator). Asked at most every ``end_probe_s``, only by a caught-up subscription."""
        if self.end_probe_s is None or self.end_probe is None or time.monotonic() < self._next_probe:
            return False
        self._next_probe = time.monotonic() + self.end_probe_s
        self.end_probes += 1
        probe = self.end_probe(self.position)
        try:
            result = probe.fetch()
        except KinesisError as exc:
            log.debug("probing whether %s ended failed (asked again later): %s", self.shard_id, exc)
            return False
        if result.shard_end and not result.fetched:
            log.info("shard %s is closed and its subscription read it to its end (no ChildShards came: found by "
                     "GetRecords)", self.shard_id)
            return True
        return False

    def _before(self, sequence: int) -> bool:
        """True when ``sequence`` lies beyond what ``position`` says was handed out."""
        key = self.position.key
        return self.position.kind is not Kind.AFTER or key is None or key.sequence < sequence

    def _drop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            sub.close()

    def close(self) -> None:
        """End the subscription (the reader's ``close``). Idempotent."""
        self._drop()


class WaitingFanOut:
    """A :class:`FanOutGetter` read by one task that waits for its events: :meth:`subscribe` and :meth:`fetch`
    block where the getter's own calls return at once, and retriable errors (another subscription still holds the
    shard, a lost connection, throttling) are tried again after ``SUBSCRIBE_RETRY``'s delays (at least a second
    apart: Kinesis takes one SubscribeToShard a second per consumer and shard), up to ``max_retries`` in a row.

    Who calls: a Spark task reading its shard on an executor (``readMode=executors``). Not thread-safe: the task's
    thread owns it; the subscription's thread only sets the wake-up event (``on_pending``), which is cleared before
    each look at the queue, so an event queued between the look and the wait is never missed. ``events``: the events
    :meth:`fetch` returned.
    """

    def __init__(self, getter: FanOutGetter, max_retries: int) -> None:
        self.getter = getter
        self.events = 0
        self._wake = threading.Event()
        getter.on_pending = self._wake.set
        self._backoff = read_backoff(SUBSCRIBE_RETRY, max_retries)
        self._handed_out = False

    def subscribe(self) -> float:
        """Subscribe now, waiting out retriable refusals; returns when (``time.monotonic()``) the subscription was
        accepted. Raises what retrying cannot fix, or, after ``max_retries`` retriable ones in a row, an error that says
        it gave up (:func:`~kinesis_spout.kinesis.retrieval.read_retries.pause_after`)."""
        while True:
            try:
                self.getter.prepare()
            except KinesisError as exc:
                self._backoff.wait(self._delay(exc))
                continue
            read_succeeded(self._backoff, self.getter.shard_id)
            return time.monotonic()

    def fetch(self, deadline: float) -> FetchResult:
        """The next event (as :meth:`FanOutGetter.fetch`), waiting for it until ``deadline`` (``time.monotonic()``);
        a result with ``millis_behind_latest`` None and no record when none came in time. A retriable error after
        records were handed out ends the wait at the deadline rather than past it (the task keeps what it has): it
        returns once the deadline passed, never sooner, so a caller that reads until its deadline stops then
        instead of subscribing again at once."""
        while True:
            self._wake.clear()
            try:
                result = self.getter.fetch()
            except KinesisError as exc:
                pause = self._delay(exc)
                if self._handed_out and time.monotonic() + pause >= deadline:
                    log.info("%s: ending the read with what it holds", exc)
                    time.sleep(max(0.0, deadline - time.monotonic()))
                    return FetchResult([], None, False, 0)
                self._backoff.wait(pause)
                continue
            if result.fetched or result.shard_end or result.millis_behind_latest is not None:
                read_succeeded(self._backoff, self.getter.shard_id)
                self._handed_out = self._handed_out or bool(result.records)
                self.events += 1
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return result
            self._wake.wait(remaining)

    def _delay(self, exc: KinesisError) -> float:
        """The pause before the next try after ``exc``; raises ``exc`` when it is not retriable, and an error that
        says it gave up when the retries ran out."""
        return pause_after(self._backoff, exc, self.getter.shard_id)

    def close(self) -> None:
        """End the subscription. Idempotent."""
        self.getter.close()
