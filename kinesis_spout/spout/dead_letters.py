"""The spout's dead-letter glue: records given up on go to the dead-letter thread, their written letters come back as
done records, and dead-letter storms stop the spout.

A record whose retries ran out (failed, or timed out) or whose scheme raised stays pending in its shard's tracker,
holding the checkpoint back, until its dead letter is written. The dead-letter thread (a
:class:`~kinesis_spout.deadletters.DeadLetterWorker`) calls the handler or destination *without* the spout's lock
(user code never runs under it there), then :meth:`DeadLetterGlue.on_written` takes the lock to mark the records
done and offer the moved checkpoints.

Storms (:mod:`kinesis_spout.deadletters.storm`): the letters of records their scheme refused as they were read are
*held* (not written) while their run of dead letters in a row lasts; a record decoded ends the run and releases
them (so do ``flush_checkpoints()`` and ``close()``), and so does time: a held letter waits at most
:func:`poison_hold_s` (the checkpoint interval, at least 1 s), so the poison records at the end of what a shard holds
(a quiet shard, a closed parent whose children wait for its end) are written and settled without a later record.
When a rule trips, the letters still held and every later one are dropped unwritten: their records stay pending, so
no shard's checkpoint passes the first of them, and a restart reads them again; letters written before (of an
earlier run, or of this run once held for the bound) stay written (and checkpointed past). Every later
``next_batch``/``next_tuple`` raises the :class:`~kinesis_spout.errors.DeadLetterStormError`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable, Sequence

from kinesis_spout.deadletters.base import DeadLetter
from kinesis_spout.deadletters.storm import StormRules, StormTrip
from kinesis_spout.deadletters.worker import written_before
from kinesis_spout.errors import DeadLetterStormError
from kinesis_spout.kinesis.retrieval.wire_columns import record_of

if TYPE_CHECKING:
    from kinesis_spout.config import DeadLetterSettings, TrackingSettings
    from kinesis_spout.deadletters.worker import DeadLetterWorker
    from kinesis_spout.records import Record
    from kinesis_spout.schemes import RecordScheme
    from kinesis_spout.spout.registry import ShardRegistry
    from kinesis_spout.spout.shards import ShardLifecycle

__all__ = ["DeadLetterGlue", "poison_hold_s"]

log = logging.getLogger(__name__)

_POISON = "poison record: "  # how the reasons of records their scheme refused start (see spout.emission)
#: The shortest bound on how long the letters of a run of poison records are held (see :func:`poison_hold_s`).
MIN_POISON_HOLD_S = 1.0


def poison_hold_s(tracking: TrackingSettings) -> float:
    """How long the letters of a run of records refused by the scheme are held at most before they are written
    anyway: ``checkpoint_interval_s`` (the delay of a checkpoint users accept already), at least
    :data:`MIN_POISON_HOLD_S` so that a storm of a wrong scheme is still seen before its letters are written when
    checkpoints are written at every advance. A backlog read with the wrong scheme trips the in-a-row rule within one
    GetRecords, well inside the bound."""
    return max(tracking.checkpoint_interval_s, MIN_POISON_HOLD_S)


class DeadLetterGlue:
    """Between the shards' trackers and the dead-letter thread. ``worker`` is set by ``open()`` (and read by the
    facade for its figures); every method but :meth:`on_written` is called with the registry's lock held, and the
    storm state (``rules``, ``_stopped``) is touched only then. The letters name ``stream_name`` and ``app_name``;
    ``dead_letters`` gives the storm rules, ``retry_limit`` and ``scheme`` what the reasons and messages say."""

    def __init__(self, registry: ShardRegistry, stream_name: str, app_name: str, dead_letters: DeadLetterSettings,
                 retry_limit: int, scheme: RecordScheme) -> None:
        self.registry = registry
        self.stream_name, self.app_name = stream_name, app_name
        self.retry_limit = retry_limit
        self.scheme = scheme
        self.worker: DeadLetterWorker | None = None
        self.rules = StormRules(dead_letters.max_in_a_row, dead_letters.max_ratio, dead_letters.window,
                                dead_letters.min_in_window)
        self._stopped = False

    def deliver(self, state: ShardLifecycle, how: str) -> None:
        """Queue the records whose retries ran out (``how``: "failed", "timed out") for the dead-letter thread."""
        limit = self.retry_limit + 1
        self._queue(state, lambda attempts: f"{how} on attempt {attempts} of {limit}", given_up=False)

    def give_up(self, state: ShardLifecycle, record: Record, reason: str) -> None:
        """Give up on a record in flight at once (its scheme refused it); its letter is held while its run lasts if
        it was refused on its first emission. After a storm, raises the :class:`DeadLetterStormError` (from the
        emitter, so no more records are taken)."""
        if state.tracker.give_up(record.key):
            self._queue(state, lambda attempts: reason, given_up=True)
            if self._stopped and self.worker is not None and self.worker.storm is not None:
                raise self.worker.storm  # stops the take at once (the facade returns the tuples taken before)

    def decoded(self, count: int) -> None:
        """``count`` records were read and decoded by the scheme (called by the emitter, in read order): the run of
        dead letters in a row ends, and its held letters are queued for writing."""
        if count <= 0 or self._stopped:
            return
        self.rules.decoded(count)
        if self.worker is not None:
            self.worker.release()

    def _queue(self, state: ShardLifecycle, reason: Callable[[int], str], *, given_up: bool) -> None:
        """Hand the tracker's new dead letters on (lock held): held while their run lasts if refused by the scheme
        on their first emission, queued at once otherwise; each counted by the storm rules, which may stop the
        spout."""
        now = time.time()
        letters = [DeadLetter(record_of(item, key.rank), reason(attempts), attempts, self.stream_name, self.app_name,
                              now) for key, item, attempts in state.tracker.take_dead_letters()]
        worker = self.worker
        assert worker is not None
        for letter in letters:
            if self._stopped:  # after a storm: not written, the record stays pending and holds the checkpoint
                continue
            read_now = given_up and letter.attempts == 1  # refused as it was read: part of a run in read order
            trip = self.rules.dead_lettered(read_now)
            if trip is not None:
                self._trip(trip, worker, letter)
            elif read_now:
                worker.hold([letter])
            else:
                worker.put([letter])

    def _trip(self, trip: StormTrip, worker: DeadLetterWorker, last: DeadLetter) -> None:
        """A rule tripped on ``last`` (lock held): stop for good, drop the held letters, log and keep the error."""
        self._stopped = True
        error = DeadLetterStormError("", rule=trip.rule, letters=0)
        unwritten = [*worker.stop_for_storm(error), last]
        error.letters = len(unwritten)
        error.shard_ids = tuple(sorted({letter.record.shard_id for letter in unwritten}))
        error.args = (self._message(trip, unwritten),)
        log.error("%s", error)

    def _message(self, trip: StormTrip, unwritten: list[DeadLetter]) -> str:
        scheme = getattr(self.scheme, "__name__", None) or type(self.scheme).__name__
        poison = sum(letter.reason.startswith(_POISON) for letter in unwritten)
        cause = (f"the scheme {scheme} could not decode the records of {poison} of the {len(unwritten)} letters of "
                 f"this run: it is likely the wrong scheme for this stream" if poison else
                 "records failed until their retries ran out: the processing downstream is likely failing")
        first: dict[str, DeadLetter] = {}
        for letter in unwritten:
            first.setdefault(letter.record.shard_id, letter)
        shards = ", ".join(f"{shard} from sequence number {letter.record.sequence_number}"
                           for shard, letter in sorted(first.items()))
        worker = self.worker
        # letters queued before the trip may still be on their way to the destination: they count as written before
        where = written_before(worker.writer if worker is not None else None,
                               under_way=worker is not None and bool(worker.written or worker.pending))
        sample = f"{unwritten[0].record.message_id}: {unwritten[0].reason}"[:300]
        return (f"dead-letter storm on stream {self.stream_name!r} (app {self.app_name!r}): {trip.summary} "
                f"({trip.rule}={trip.limit:g}); the spout stopped. Likely cause: {cause} (first: {sample}). "
                f"Checkpoints: the run's last {len(unwritten)} letters were not written and no checkpoint passes "
                f"their records, so a restart reads them again ({shards}); {where}. "
                f"To resume: fix the scheme (SpoutConfig(scheme=...)) or whatever fails the records, or, if these "
                f"dead letters are expected, raise {trip.rule} (DeadLetterSettings; 0 disables the rule), and restart")

    def on_written(self, letters: Sequence[DeadLetter]) -> None:
        """The dead-letter thread wrote these letters (takes the lock): their records are done; offer the moved
        checkpoints. Letters of shards no longer read (lease lost, handed over) change nothing: the next owner reads
        them again."""
        registry = self.registry
        with registry.lock:
            moved: dict[str, ShardLifecycle] = {}
            for letter in letters:
                state = registry.shards.get(letter.record.shard_id)
                if state is not None and state.dead_letter_written(letter.record.key):
                    moved[state.shard_id] = state
            for state in moved.values():
                registry.offer_checkpoint(state)
            registry.notify_settled()  # a hand-back may be waiting for these
