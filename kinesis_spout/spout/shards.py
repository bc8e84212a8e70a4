"""One owned shard's lifecycle: :class:`ShardLifecycle`, with an explicit :class:`ShardPhase`.

A spout holds one ``ShardLifecycle`` per shard it reads, from the moment the shard sync hands it the shard (its
parents are done, or it has none) until the shard is given back or dropped. Shards still waiting for their parents
have no lifecycle object: the shard sync keeps them, and makes one when they become ready. The phases::

    STARTING --start_reading()--> READING            (reader, tracker, getter made; the reader starts)
    STARTING --drop()-----------> DROPPED            (its lease was lost before the reader started)
    READING  --drain()----------> DRAINING           (hand-back begins: no new records, retries and acks go on)
    READING  --finish()---------> FINISHED           (shard end read and every record done: shard end offered)
    READING  --drop()-----------> DROPPED            (lease lost, ZooKeeper session gone: nothing more written)
    DRAINING --hand_back()------> HANDED_BACK        (records in flight settled or waited for; checkpoint offered)
    DRAINING --finish()---------> FINISHED           (the shard ended while it drained)
    DRAINING --drop()-----------> DROPPED            (the lease was lost during the wait)
    FINISHED --hand_back()------> HANDED_BACK        (nothing in flight: nothing to drain)
    FINISHED --drop()-----------> DROPPED
    HANDED_BACK, DROPPED: final.

What each phase allows (the ``*_PHASES`` sets): new records are taken only while READING; due retries are emitted
while READING or DRAINING (a drain lets the records in flight finish); acks, fails and written dead letters count
while READING, DRAINING or FINISHED (a finished shard has nothing in flight, so they change nothing there); the
checkpoint is offered as it moves while READING or DRAINING, a FINISHED shard's is its shard end, and a shard
HANDED_BACK or DROPPED moves no checkpoint any more (its next owner reads what it had in flight again).

Threads: the phase and every field but ``reader`` are touched only under the spout's lock (the
:class:`~kinesis_spout.spout.registry.ShardRegistry`'s ``lock``), by whichever thread holds it: the consumer's
(taking records, acks, fails), the shard sync thread (adding shards, hand-backs), the checkpoint writer's thread
(making the checkpoint to write) and the dead-letter thread. The reader has its own lock and threads.
"""

from __future__ import annotations

import enum
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.coordination.lineage import ShardStart, end_checkpoint
from kinesis_spout.errors import SpoutStateError
from kinesis_spout.kinesis.shards import Shard
from kinesis_spout.positions import after
from kinesis_spout.records import SequenceKey
from kinesis_spout.spout.kpl import stored_sub
from kinesis_spout.tracker import FailOutcome, TrackerStats
from kinesis_spout.tracking.keys import Key

if TYPE_CHECKING:
    from kinesis_spout.kinesis.retrieval.reader import BufferedShardReader, RoundRobinReader
    from kinesis_spout.tracking.span import Fill
    from kinesis_spout.tracking.spans import Span

__all__ = ["ACK_PHASES", "CHECKPOINT_PHASES", "NEW_RECORD_PHASES", "RETRY_PHASES", "TRANSITIONS",
           "IllegalShardTransition", "RecordTracker", "ShardLifecycle", "ShardPhase", "ShardTracker"]


class RecordTracker(Protocol):
    """What the spout asks of a shard's in-flight tracker, record by record: the methods that
    :class:`~kinesis_spout.tracker.InflightRecordTracker` and :class:`~kinesis_spout.tracking.spans.SpanTracker`
    share (with the same answers). Called under the spout's lock only."""

    @property
    def checkpoint(self) -> SequenceKey | None: ...
    @property
    def stats(self) -> TrackerStats: ...
    @property
    def inflight_count(self) -> int: ...
    @property
    def inflight_bytes(self) -> int: ...
    @property
    def retry_queue_len(self) -> int: ...
    @property
    def dead_letters_pending(self) -> int: ...
    def emit(self, key: Key, now: float, item: object = None, size: int = 0) -> bool: ...
    def emit_many(self, keys: Sequence[Key], now: float, items: Sequence[object] | None = None,
                  sizes: Sequence[int] | None = None) -> int: ...
    def ack(self, key: Key) -> bool: ...
    def ack_many(self, keys: Iterable[Key]) -> int: ...
    def fail(self, key: Key, now: float) -> FailOutcome: ...
    def give_up(self, key: Key) -> bool: ...
    def take_dead_letters(self) -> list[tuple[SequenceKey, Any, int]]: ...
    def dead_letter_written(self, key: Key) -> bool: ...
    def next_retry(self, now: float) -> tuple[SequenceKey, Any, int] | None: ...
    def has_due_retry(self, now: float) -> bool: ...
    def expire(self, now: float) -> list[tuple[SequenceKey, FailOutcome]]: ...
    def next_due(self, now: float) -> float | None: ...


class ShardTracker(RecordTracker, Protocol):
    """A :class:`RecordTracker` that also puts a batch of the shard's records in flight as one span and acks it
    whole, and acks or fails one emission (attempt) of a record
    (:class:`~kinesis_spout.tracking.spans.SpanTracker`): the tracker a :class:`ShardLifecycle` holds."""

    def emit_span(self, keys: Sequence[Key], now: float, items: Sequence[object] | None = None,
                  sizes: Sequence[int] | None = None) -> Span | None: ...
    def emit_span_of_ends(self, count: int, low: int, high: int, now: float, fill: Fill,
                          items: Sequence[object] | None = None, nbytes: int = 0) -> Span | None: ...
    def ack_span(self, span: Span, exclude: Iterable[Key] = ()) -> int: ...
    def ack_attempt(self, key: Key, attempt: int) -> bool: ...
    def fail_attempt(self, key: Key, attempt: int, now: float) -> FailOutcome: ...


class ShardPhase(enum.Enum):
    """Where one owned shard stands (modelled on KCL's shard consumer states)."""

    STARTING = "starting"
    READING = "reading"
    DRAINING = "draining"
    FINISHED = "finished"
    HANDED_BACK = "handed back"
    DROPPED = "dropped"

    # Members compare by identity, so they may hash by identity too: in C, where Enum's own hash (of the name) runs
    # in Python. The phase sets below are looked up on every ack and take.
    __hash__ = object.__hash__


_P = ShardPhase
#: The legal moves: each phase and the phases it may go to.
TRANSITIONS: Mapping[ShardPhase, frozenset[ShardPhase]] = {
    _P.STARTING: frozenset({_P.READING, _P.DROPPED}),
    _P.READING: frozenset({_P.DRAINING, _P.FINISHED, _P.DROPPED}),
    _P.DRAINING: frozenset({_P.HANDED_BACK, _P.FINISHED, _P.DROPPED}),
    _P.FINISHED: frozenset({_P.HANDED_BACK, _P.DROPPED}),
    _P.HANDED_BACK: frozenset(),
    _P.DROPPED: frozenset(),
}
NEW_RECORD_PHASES = frozenset({_P.READING})
RETRY_PHASES = frozenset({_P.READING, _P.DRAINING})
ACK_PHASES = frozenset({_P.READING, _P.DRAINING, _P.FINISHED})
CHECKPOINT_PHASES = frozenset({_P.READING, _P.DRAINING})


class IllegalShardTransition(SpoutStateError):
    """A shard was asked to move to a phase it may not reach from where it stands (a bug of the spout)."""

    def __init__(self, shard_id: str, current: ShardPhase, target: ShardPhase) -> None:
        allowed = ", ".join(sorted(p.name for p in TRANSITIONS[current])) or "nowhere: it is over"
        super().__init__(f"shard {shard_id} cannot go from {current.name} to {target.name}: from {current.name} it "
                         f"may only go to {allowed}. This is a bug of the spout: please report it with the log")
        self.shard_id, self.current, self.target = shard_id, current, target


class ShardLifecycle:
    """One owned shard: its phase, reader, tracker and checkpoint bookkeeping (see the module's diagram).

    Made by the spout when it starts reading the shard (``STARTING``); every method is called with the spout's lock
    held. ``latest`` is set once by the registry: what the checkpoint writer calls when the shard is due (the same
    callable for the shard's whole life, so that the writer sees a repeated offer as the one pending).
    """

    def __init__(self, shard: Shard, tracker: ShardTracker, reader: BufferedShardReader, start: ShardStart,
                 restored: Checkpoint | None = None) -> None:
        self.shard = shard
        self.tracker = tracker
        self.reader = reader
        self.start = start
        self.restored = restored  # the stored checkpoint the shard started from
        self.offered: SequenceKey | None = restored.key if restored is not None else None
        self.aggregates: dict[int, int] = {}  # sequence -> user records, for KPL aggregates in flight
        self.emitted_bytes = 0  # bytes (data + partition key) of the new records emitted
        self.stored: Checkpoint | None = None  # the stored checkpoint last seen by the spout's metrics()
        self.stored_at = time.monotonic()  # when metrics() first saw it
        self.latest: Callable[[], Checkpoint | None] = lambda: None
        self.phase = ShardPhase.STARTING

    @property
    def shard_id(self) -> str:
        return self.shard.shard_id

    @property
    def finished(self) -> bool:
        return self.phase is ShardPhase.FINISHED

    def __repr__(self) -> str:
        return f"ShardLifecycle({self.shard_id}, {self.phase.name})"

    # -- moves ------------------------------------------------------------------------------------------------
    def _move(self, target: ShardPhase) -> None:
        if target not in TRANSITIONS[self.phase]:
            raise IllegalShardTransition(self.shard_id, self.phase, target)
        self.phase = target

    def start_reading(self) -> None:
        """STARTING -> READING: start the reader (the spout is open)."""
        self._move(ShardPhase.READING)
        self.reader.start()

    def drain(self, rr: RoundRobinReader) -> None:
        """READING -> DRAINING (a hand-back begins): take no more new records; retries and acks go on."""
        self._move(ShardPhase.DRAINING)
        self._detach(rr)

    def finish(self, rr: RoundRobinReader) -> Checkpoint:
        """READING or DRAINING -> FINISHED: the shard was read to its end and every record is done. Returns the
        shard end to write."""
        self._move(ShardPhase.FINISHED)
        if self.reader in rr.readers:
            rr.remove(self.reader)
        return self.end_checkpoint()

    def hand_back(self) -> None:
        """DRAINING or FINISHED -> HANDED_BACK: the spout forgets the shard; acks for it change nothing now."""
        self._move(ShardPhase.HANDED_BACK)
        self.reader.stop()

    def drop(self, rr: RoundRobinReader) -> None:
        """-> DROPPED (its lease is lost): take nothing more, write nothing more."""
        self._move(ShardPhase.DROPPED)
        self._detach(rr)

    def _detach(self, rr: RoundRobinReader) -> None:
        if self.reader in rr.readers:
            rr.remove(self.reader)
        # stops fetching and lets a thread of the reader's own end after its call in progress, without waiting (the
        # lock is held); whoever forgets the shard may close it again, waiting for that call
        self.reader.close(timeout_s=0.0)

    # -- what a phase allows ----------------------------------------------------------------------------------
    @property
    def takes_new_records(self) -> bool:
        return self.phase in NEW_RECORD_PHASES

    @property
    def emits_retries(self) -> bool:
        return self.phase in RETRY_PHASES

    @property
    def counts_acks(self) -> bool:
        return self.phase in ACK_PHASES

    @property
    def moves_checkpoint(self) -> bool:
        return self.phase in CHECKPOINT_PHASES

    # -- acks -------------------------------------------------------------------------------------------------
    def ack(self, rank: int) -> bool:
        """Ack one record (by rank); True when the safe checkpoint moved. Nothing changes outside ACK_PHASES."""
        return self.counts_acks and self.tracker.ack(rank)

    def ack_attempt(self, rank: int, attempt: int) -> bool:
        """Ack one emission of a record: only while it is in flight at ``attempt`` (a batch's retry); True when the
        safe checkpoint moved. Nothing changes outside ACK_PHASES, nor for an emission that is over (the record
        failed since, or is out again at a later attempt)."""
        return self.counts_acks and self.tracker.ack_attempt(rank, attempt)

    def ack_many(self, ranks: Iterable[int]) -> bool:
        """:meth:`ack` for several records; True when the safe checkpoint moved."""
        return self.counts_acks and bool(self.tracker.ack_many(ranks))

    def ack_span(self, span: Span, exclude: Iterable[int] = ()) -> bool:
        """Ack every record of ``span`` (a batch's records of this shard) still in its first emission, but those in
        ``exclude`` (ranks); True when any was acked. Nothing changes outside ACK_PHASES, nor for a span of an
        earlier tracker of the shard (the shard was handed back or dropped and taken again)."""
        return self.counts_acks and bool(self.tracker.ack_span(span, exclude))

    def fail_attempt(self, rank: int, attempt: int, now: float) -> FailOutcome | None:
        """Fail one emission of a record: only while it is in flight at ``attempt`` (else ``UNKNOWN``, nothing
        changes). None outside ACK_PHASES."""
        return self.tracker.fail_attempt(rank, attempt, now) if self.counts_acks else None

    def fail(self, rank: int, now: float) -> FailOutcome | None:
        """Fail one record: it is retried or (retries spent) due for its dead letter. None outside ACK_PHASES."""
        return self.tracker.fail(rank, now) if self.counts_acks else None

    def dead_letter_written(self, key: SequenceKey) -> bool:
        """A dead letter of this shard was written: its record is done. True when the safe checkpoint moved."""
        return self.counts_acks and self.tracker.dead_letter_written(key)

    # -- checkpoints ------------------------------------------------------------------------------------------
    def end_checkpoint(self) -> Checkpoint:
        """The checkpoint of a finished shard: every record done, its children may be read (from its pin, when
        the shard started at one and had nothing after it)."""
        return end_checkpoint(self.shard_id, self.start, self.tracker.checkpoint)

    def checkpoint_to_write(self) -> Checkpoint | None:
        """The checkpoint to write now (the writer's thread, lock held): the shard end once FINISHED, else the safe
        checkpoint, or None when it has not moved since the last one made."""
        if self.phase is ShardPhase.FINISHED:
            return self.end_checkpoint()
        key = self.tracker.checkpoint
        if key is None or key == self.offered:
            return None
        self.offered = key
        return Checkpoint.at(self.shard_id, after(key.sequence, stored_sub(self.aggregates, self.restored, key)))

    def checkpoint_unoffered(self) -> bool:
        """True when the safe checkpoint moved past the last one made for the writer."""
        return self.tracker.checkpoint != self.offered
