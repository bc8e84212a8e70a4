"""Shard discovery while a spout runs: new shards of a reshard are found and read once their parents are done.

A :class:`ShardSync` thread lists the stream's shards every ``interval_s`` (and at once when woken: the spout
finished a shard, whose children may now be read, or a lease worker joined or left), keeps those the spout owns and
does not read yet, and hands over the ones whose parents are finished: a parent that is still listed must have its
end (``shard_end``) stored before any record of its children is delivered, so the records of one partition key keep
their order across a split or a merge (of a merge, both parents). A parent that is no longer listed (past the
stream's retention) holds nobody back. At the app's first start at ``LATEST`` the first listing pins every open
shard and marks every closed one as not read (:func:`kinesis_spout.coordination.starts.record_first_start`): such a
mark is an end, so it holds nobody back either.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Any, Callable

from kinesis_spout.checkpoint.base import CheckpointStore
from kinesis_spout.config import InitialPosition
from kinesis_spout.coordination.lineage import waiting_for_parents
from kinesis_spout.coordination.listing import ListingSchedule
from kinesis_spout.coordination.starts import record_first_start
from kinesis_spout.errors import LeaseError, SpoutError, StreamNotFoundError
from kinesis_spout.kinesis.shards import Shard, list_shards

__all__ = ["ShardSync"]

log = logging.getLogger(__name__)

#: A round that takes this long (listing, lease round and starting its new shards) says where its time went (INFO).
SLOW_ROUND_S = 5.0


class ShardSync:
    """Finds the shards a running spout should start reading.

    Who calls: the spout. ``sync()`` runs one round and returns the shards to start (``open()`` calls it once
    before the readers start); ``start()`` runs rounds on a daemon thread, which hands new shards to ``add``;
    ``wake()`` (any thread, never blocks) asks for a round now; ``close()`` stops and joins the thread
    (idempotent). ``owns`` picks the spout's shards from the listing, ``known`` says which shard ids the spout
    already reads or finished, ``flush`` writes pending checkpoints (so a parent's end is stored before its
    children are looked at). ``initial_position`` is the app's; ``owner`` (the worker id) stamps what the first
    start stores, and ``take_fresh_pins()`` hands the pins it wrote to ``open()`` once. The thread owns nothing of
    the spout: it reads through these callables.
    """

    def __init__(self, client: Any, stream_name: str, store: CheckpointStore, *, interval_s: float,
                 owns: Callable[[list[Shard]], list[Shard]], known: Callable[[], set[str]],
                 add: Callable[[list[Shard]], None], flush: Callable[[float], bool],
                 on_error: Callable[[SpoutError], None], round_s: float | None = None,
                 forget: Callable[[str], None] | None = None,
                 initial_position: InitialPosition = InitialPosition.TRIM_HORIZON,
                 initial_timestamp: datetime | None = None, owner: str = "") -> None:
        self.client = client
        self.stream_name = stream_name
        self.store = store
        self.round_s = round_s if round_s is not None else interval_s  # how often ``owns`` is asked
        self._owns = owns
        self._known = known
        self._add = add
        self._flush = flush
        self._on_error = on_error
        self._forget = forget
        self._cleaned_for: frozenset[str] | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0
        self.listed: list[Shard] = []
        self._listing_s = 0.0  # the time the current round spent listing the shards (the sync thread's)
        self._schedule = ListingSchedule(interval_s)  # when the shards are listed next
        self.finished: set[str] = set()  # shards whose end is stored (closed shards only ever join this set)
        self.initial_position = initial_position
        self.initial_timestamp = initial_timestamp
        self.owner = owner
        self._first_start_done = False  # the first listing was checked for the app's first start
        self._fresh_pins: dict[str, datetime] = {}  # pins the first start wrote, until take_fresh_pins()
        #: The shards of the last round held back by their parents: shard id -> the parents not read to their end
        #: yet (listed, not finished). Replaced whole by each round (the sync thread); read freely (the open line).
        self.waiting: dict[str, tuple[str, ...]] = {}

    @property
    def interval_s(self) -> float:
        """How often the shards are listed."""
        return self._schedule.interval_s

    def take_fresh_pins(self) -> dict[str, datetime]:
        """The pins this sync's first listing wrote (shard id -> time), once. Called by the spout's ``open()``."""
        pins, self._fresh_pins = self._fresh_pins, {}
        return pins

    def ready(self, relist: bool = False) -> list[Shard]:
        """The shards that may be read now: listed (listed again when ``relist`` or older than ``interval_s``),
        not finished, and not waiting for a parent that is listed and not finished. The first listing records the
        app's first start (raises when the store fails: nothing is handed over until it is recorded). Called by
        ``sync()`` only (the sync thread, or ``open()`` before the thread starts)."""
        now = time.monotonic()
        if relist or self._schedule.due(now):
            self._list()
        listed = self.listed
        if not self._first_start_done:
            self._fresh_pins = record_first_start(self.store, self.owner, self.initial_position, listed)
            self._first_start_done = True
        for shard in listed:  # a closed shard may have been finished by anyone reading it: its end is stored
            if shard.closed and shard.shard_id not in self.finished:
                checkpoint = self.store.load(shard.shard_id)
                if checkpoint is not None and checkpoint.shard_end:
                    self.finished.add(shard.shard_id)
        done = self.finished
        candidates = [s for s in listed if s.shard_id not in done]
        blocked = waiting_for_parents({s.shard_id: s.parents for s in candidates}, {s.shard_id for s in listed},
                                      done)
        listed_ids = {s.shard_id for s in listed}
        self.waiting = {s.shard_id: tuple(p for p in s.parents if p in listed_ids and p not in done)
                        for s in candidates if s.shard_id in blocked}
        if blocked:
            log.debug("shards waiting for their parents to be read to their end: %s", ", ".join(sorted(blocked)))
        return [s for s in candidates if s.shard_id not in blocked]

    def _list(self) -> None:
        """List the stream's shards now (``listed``) and clean up after those that left the listing."""
        began = time.monotonic()
        self.listed = list_shards(self.client, self.stream_name)
        self._listing_s += time.monotonic() - began
        self._schedule.listed(time.monotonic())
        self._clean_up(self.listed)

    def _may_have_finished(self) -> bool:
        """After a wake: list the shards again and say whether one of them is closed with its end not seen stored
        (a shard this spout finished may be it: its end must be written before its children are looked at)."""
        self._list()
        return any(s.closed and s.shard_id not in self.finished for s in self.listed)

    def _clean_up(self, listed: list[Shard]) -> None:
        """Delete the stored state of shards that left the listing (past the stream's retention: nothing can be
        read from them any more) once every listed child of theirs has its own checkpoint (the rule KCL follows):
        then nothing is decided by them. A shard that is still listed keeps its checkpoint, finished or not, or it
        would be read again. Runs when the listing changed."""
        ids = frozenset(s.shard_id for s in listed)
        if not ids or ids == self._cleaned_for:
            return
        self._cleaned_for = ids
        stored = self.store.list()
        children: dict[str, list[str]] = {}
        for shard in listed:
            for parent in shard.parents:
                children.setdefault(parent, []).append(shard.shard_id)
        for shard_id in stored:
            if shard_id in ids:
                continue
            if all(child in stored for child in children.get(shard_id, ())):
                self.store.delete(shard_id)
                if self._forget is not None:
                    self._forget(shard_id)
                log.info("shard %s is no longer listed (past the stream's retention) and its children have "
                         "checkpoints: its checkpoint was deleted", shard_id)

    def sync(self, relist: bool = True) -> list[Shard]:
        """One round: the shards that may be read now and that the spout owns (``owns``, which may take or give
        back leases) but does not read yet."""
        self.rounds += 1
        owned = self._owns(self.ready(relist))
        known = self._known()
        return [s for s in owned if s.shard_id not in known]

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"kinesis-shard-sync-{self.stream_name}",
                                            daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """Ask for a round now (a shard finished: its children may be ready)."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            woken = self._wake.wait(self.round_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                # a finished shard's end must be stored before its children are looked at; a wake with no closed
                # shard left to finish (a worker joined or left) goes to the round at once: a flush waits up to 10 s
                # while records keep coming
                if woken and self._may_have_finished():
                    self._flush(10.0)
                began, self._listing_s = time.monotonic(), 0.0
                ready = self.sync(relist=False)
                synced = time.monotonic()
                if ready and not self._stop.is_set():
                    log.info("starting %d new shards of %r: %s", len(ready), self.stream_name,
                             ", ".join(s.shard_id for s in ready))
                    self._add(ready)
                self._log_slow_round(began, synced, len(ready))
            except (StreamNotFoundError, LeaseError) as exc:  # retrying cannot fix these: the user must hear
                log.error("shard sync: %s", exc)
                self._on_error(exc)
            except SpoutError as exc:  # throttled, ZooKeeper away: the next round tries again
                log.warning("shard sync of %r failed (trying again in %.0f s): %s", self.stream_name,
                            self.interval_s, exc)
            except Exception as exc:  # noqa: BLE001 - the spout must hear of a bug here, not lose the thread
                log.exception("shard sync of %r failed", self.stream_name)
                self._on_error(SpoutError(f"shard sync of {self.stream_name!r} failed: {exc!r}"))

    def _log_slow_round(self, began: float, synced: float, started: int) -> None:
        """Say where a round's time went when it took over ``SLOW_ROUND_S`` (the thread's own wall clock)."""
        took = time.monotonic() - began
        if took >= SLOW_ROUND_S:
            log.info("a shard sync round of %r took %.1f s: listing the shards %.1f s, the lease round %.1f s, "
                     "starting %d new shards %.1f s", self.stream_name, took, self._listing_s,
                     synced - began - self._listing_s, started, took - (synced - began))

    def close(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
