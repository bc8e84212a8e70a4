"""A batch of tuples that can be acked whole: :class:`SpoutBatch`, what ``KinesisSpout.next_batch()`` returns.

A batch is a list of :class:`~kinesis_spout.records.SpoutTuple` (iterate it, index it, take its ``len``, as ever)
that also remembers how its records went in flight: the new records of each shard as one span of the shard's
tracker, and the retries (records emitted again after a failure) one by one, each with its attempt.
:meth:`SpoutBatch.ack` then costs one span ack per shard and chunk taken, not one ack per record, and acks exactly
the emissions the batch handed out: a record failed since (waiting for its retry, or out again in a later batch at a
later attempt) is left to its own ack, fail or dead letter.

Threads: a batch is made and filled by ``next_batch`` under the spout's lock; its methods take that lock (any thread
may call them) and touch its fields only under it (``_failed``, ``_acked``). The spans and lifecycles it refers to
are the spout's, under the same lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from kinesis_spout.records import SpoutTuple

if TYPE_CHECKING:
    from kinesis_spout.spout.acks import AckRouter
    from kinesis_spout.spout.shards import ShardLifecycle
    from kinesis_spout.tracking.spans import Span

__all__ = ["SpoutBatch"]


class SpoutBatch(list[SpoutTuple]):
    """The tuples of one ``next_batch()`` call, ackable whole.

    - :meth:`ack`: every tuple of the batch is done (but those failed through the batch);
    - :meth:`fail`: these tuples failed (retried after their backoff, dead-lettered once retries run out);
    - :meth:`ack_except`: fail these, ack the rest, under one lock hold.

    An ack acks each emission the spout handed out in this batch (and in batches and tuples added to it with ``+``),
    at the tuple's ``attempt``, and nothing else: the checkpoints move as if each tuple still in flight at that
    attempt had been acked with ``spout.ack(message_id)``. Per-record ``spout.ack``/``fail`` of the batch's tuples
    may be mixed with it: a tuple acked already is not acked again, and a tuple failed with ``spout.fail`` is not
    acked by the batch, neither while it waits for its retry nor once it is out again (at a later attempt, in
    another batch, whose ack or fail decides). Removing a tuple from the list does not exclude it from :meth:`ack`
    (fail it instead). Acking a batch twice, or after its shard was handed back or dropped, changes nothing.
    """

    __slots__ = ("_router", "_spans", "_singles", "_failed", "_acked")

    def __init__(self, router: AckRouter, tuples: Iterable[SpoutTuple] = ()) -> None:
        super().__init__(tuples)
        self._router = router
        self._spans: list[tuple[ShardLifecycle, Span]] = []  # the new records of a shard taken together
        # retries, acked one emission each: (shard, rank, message id, attempt)
        self._singles: list[tuple[ShardLifecycle | None, int, str, int]] = []
        self._failed: set[str] = set()  # message ids failed through the batch: never acked by it
        self._acked = False

    # -- filled by the spout (lock held) ----------------------------------------------------------------------
    def add_span(self, state: ShardLifecycle, span: Span) -> None:
        """Called by the emitter (lock held): the new records of ``state`` just put in flight as ``span``."""
        self._spans.append((state, span))

    def add_single(self, state: ShardLifecycle | None, rank: int, mid: str, attempt: int) -> None:
        """Called by the emitter (lock held): a record emitted alone (a retry) at ``attempt``, acked by the batch
        only while it is in flight at that attempt. ``state`` None: a tuple added from outside the spout's batches
        (``batch + [tuples]``), looked up by its id when acked."""
        self._singles.append((state, rank, mid, attempt))

    # -- the consumer's calls ---------------------------------------------------------------------------------
    def ack(self) -> None:
        """Every tuple of the batch was processed: ack them all (those failed through :meth:`fail` excepted), each
        shard's checkpoint offered once after its acks. Raises ``SpoutStateError`` unless the spout is open. A second
        call does nothing."""
        self.ack_except(())

    def fail(self, message_ids: Iterable[str]) -> None:
        """These tuples of the batch failed: each is emitted again after its backoff, or dead-lettered once its
        retries ran out (as ``spout.fail``); :meth:`ack` will not ack them. Each fails the emission the batch handed
        out (the tuple's attempt): one that failed since and is out again at a later attempt is left to that attempt
        (an id the batch does not hold is failed by id, as ``spout.fail``). Raises ``SpoutStateError`` unless the
        spout is open."""
        mids = list(message_ids)
        router = self._router
        with router.registry.lock:
            router.fail_many(self._emissions(mids))
            self._failed.update(mids)

    def _emissions(self, mids: list[str]) -> list[str | SpoutTuple]:
        """The batch's own tuple for each of ``mids`` (the latest attempt when it holds several), or the id itself
        when the batch holds none: what :meth:`fail` fails. One pass over the batch's tuples."""
        wanted = set(mids)
        own: dict[str, SpoutTuple] = {}
        for t in self:
            mid = t.message_id
            if mid in wanted:
                have = own.get(mid)
                if have is None or t.attempt > have.attempt:
                    own[mid] = t
        return [own.get(mid, mid) for mid in mids]

    def ack_except(self, failed_ids: Iterable[str]) -> None:
        """Fail ``failed_ids`` (as :meth:`fail`) and ack every other tuple of the batch, under one lock hold.

        The spans are acked whole (their records failed, retried or acked alone since are left to their own acks); the
        retries one by one, each only while it is in flight at the attempt the batch handed out (failed since, it waits
        for its retry or is out again in another batch: left to that one); then each shard whose checkpoint moved is
        offered to the checkpoint writer once. Spans of a shard this spout no longer reads with the same lifecycle
        (handed back, dropped, or taken again since) ack nothing. Raises ``SpoutStateError`` unless the spout is
        open."""
        router = self._router
        registry = router.registry
        with registry.lock:
            registry.check_open()
            failed = list(failed_ids)
            if failed:
                self.fail(failed)
            if self._acked:
                return
            shards = registry.shards
            skip = self._failed
            moved: dict[str, ShardLifecycle] = {}
            for state, span in self._spans:
                if shards.get(state.shard_id) is state and state.ack_span(span):
                    moved[state.shard_id] = state
            for owner, rank, mid, attempt in self._singles:
                if mid in skip:
                    continue
                if owner is None:  # a tuple added from elsewhere: found by its id
                    found = router.lookup(mid)
                    if found is None:
                        continue
                    owner, rank = found
                if shards.get(owner.shard_id) is owner and owner.ack_attempt(rank, attempt):
                    moved[owner.shard_id] = owner
            self._acked = True
            self._spans, self._singles = [], []  # what they hold (spans, lifecycles) may be freed now
            for state in moved.values():
                registry.offer_checkpoint(state)
            registry.notify_settled()

    # -- adding batches keeps what makes them ackable ---------------------------------------------------------
    def _merged(self, other: Iterable[SpoutTuple], first: bool) -> SpoutBatch:
        merged = SpoutBatch(self._router)
        parts = [self, other] if first else [other, self]
        for part in parts:
            list.extend(merged, part)
            merged._take_parts(part)
        return merged

    def _take_parts(self, part: Iterable[SpoutTuple]) -> None:
        if isinstance(part, SpoutBatch):
            self._spans.extend(part._spans)
            self._singles.extend(part._singles)
            self._failed |= part._failed
        else:  # tuples from elsewhere (e.g. a list carried over): acked one by one, by id
            for t in part:
                self._singles.append((None, 0, t.message_id, t.attempt))

    def __add__(self, other: Iterable[SpoutTuple]) -> SpoutBatch:  # type: ignore[override]
        return self._merged(other, True)

    def __radd__(self, other: Iterable[SpoutTuple]) -> SpoutBatch:
        return self._merged(other, False)

    def __iadd__(self, other: Iterable[SpoutTuple]) -> SpoutBatch:  # type: ignore[override]
        other = list(other) if not isinstance(other, (list, tuple)) else other
        list.extend(self, other)
        self._take_parts(other)
        return self
