"""The spout's dead-letter glue: records given up on go to the dead-letter thread, and their written letters come
back as done records.

A record whose retries ran out (failed, or timed out) or whose scheme raised stays pending in its shard's tracker,
holding the checkpoint back, until its dead letter is written. The dead-letter thread (a
:class:`~kinesis_spout.deadletters.DeadLetterWorker`) calls the handler or destination *without* the spout's lock
(user code never runs under it there), then :meth:`DeadLetterGlue.on_written` takes the lock to mark the records
done and offer the moved checkpoints.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Sequence

from kinesis_spout.deadletters.base import DeadLetter

if TYPE_CHECKING:
    from kinesis_spout.config import SpoutConfig
    from kinesis_spout.deadletters.worker import DeadLetterWorker
    from kinesis_spout.records import Record
    from kinesis_spout.spout.registry import ShardRegistry
    from kinesis_spout.spout.shards import ShardLifecycle

__all__ = ["DeadLetterGlue"]


class DeadLetterGlue:
    """Between the shards' trackers and the dead-letter thread. ``worker`` is set by ``open()`` (and read by the
    facade for its figures); every method but :meth:`on_written` is called with the registry's lock held."""

    def __init__(self, registry: ShardRegistry, config: SpoutConfig) -> None:
        self.registry = registry
        self.config = config
        self.worker: DeadLetterWorker | None = None

    def deliver(self, state: ShardLifecycle, how: str) -> None:
        """Queue the records whose retries ran out (``how``: "failed", "timed out") for the dead-letter thread."""
        limit = self.config.retry_limit + 1
        self._queue(state, lambda attempts: f"{how} on attempt {attempts} of {limit}")

    def give_up(self, state: ShardLifecycle, record: Record, reason: str) -> None:
        """Give up on a record in flight at once (its scheme refused it): queue its dead letter."""
        if state.tracker.give_up(record.key):
            self._queue(state, lambda attempts: reason)

    def _queue(self, state: ShardLifecycle, reason: Callable[[int], str]) -> None:
        cfg = self.config
        now = time.time()
        letters = [DeadLetter(record, reason(attempts), attempts, cfg.stream_name, cfg.app_name, now)
                   for _key, record, attempts in state.tracker.take_dead_letters()]
        assert self.worker is not None
        self.worker.put(letters)

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
