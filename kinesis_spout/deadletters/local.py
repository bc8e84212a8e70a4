"""The default dead-letter writer: whole letters in a local JSON Lines file, a few log lines per storm of letters,
and the log as the last resort where the file cannot be created.

Configured by :class:`kinesis_spout.config.deadletters.LocalDeadLetters` (the default ``SpoutConfig.dead_letter``):
``<folder>/<app_name>/<stream_name>.jsonl``, the folder being ``$KINESIS_SPOUT_DEAD_LETTER_DIR`` or
``./kinesis-spout-dead-letters``.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from typing import Callable, Sequence

from kinesis_spout.config.deadletters import DEAD_LETTER_DIR_ENV
from kinesis_spout.deadletters.envelope import DeadLetter, envelope_bytes
from kinesis_spout.deadletters.jsonl import JsonLinesWriter

__all__ = ["SUMMARY_EVERY_S", "LocalDeadLetterWriter"]

log = logging.getLogger(__name__)

#: At most one summary line of the letters written per this many seconds (and one at close).
SUMMARY_EVERY_S = 10.0


class LocalDeadLetterWriter:
    """Appends letters to ``path`` (folders created on the first write), each batch flushed and fsynced before
    ``write`` returns, so a record is done (and its checkpoint may pass it) only once its letter is on disk.

    Logging: the first letter of each shard at WARNING, with the file's path; then a summary (letters per shard) at
    most every :data:`SUMMARY_EVERY_S` seconds, and at close. Where the folder or the file cannot be created or
    opened (``OSError``: read-only, no permission), the writer falls back to the log for good: one WARNING naming
    the folder and the settings that move it, then each letter whole (its data in base64) at ERROR. A failure of an
    open file (disk full, I/O error) is raised instead, and retried by the dead-letter thread, the checkpoint
    waiting. Who calls: the spout's dead-letter thread only; it changes the file, the log and its own counters.
    """

    def __init__(self, path: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._file = JsonLinesWriter(path)
        self._clock = clock
        self._fallback = False
        self._seen: set[str] = set()  # shards whose first letter was logged
        self._unsummarised: Counter[str] = Counter()
        self._last_summary = clock()
        self.written = 0

    @property
    def falls_back(self) -> bool:
        """True once letters go to the log instead of the file."""
        return self._fallback

    def write(self, letters: Sequence[DeadLetter]) -> None:
        """Write the letters durably (the file) or, after a failure to create or open it, whole to the log."""
        if not letters:
            return
        if not self._fallback:
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self._file.open()
            except OSError as exc:
                self._fall_back(exc)
            else:
                self._file.write(letters)  # an error here (disk full...) is raised: retried, the checkpoint waits
        if self._fallback:
            for letter in letters:
                log.error("dead letter %s (the dead-letter file cannot be written, so this line is its only copy): "
                          "%s", letter.record.message_id, envelope_bytes(letter).decode())
            return
        self.written += len(letters)
        self._log(letters)

    def _fall_back(self, error: OSError) -> None:
        self._fallback = True
        log.warning("cannot create or open the dead-letter file %s (%s: %s): dead letters go whole to this log "
                    "instead (data in base64). Choose a writable folder with the environment variable %s, or "
                    "SpoutConfig(dead_letter=LocalDeadLetters(folder=...)) or another destination (dead_letter=...)",
                    self.path, type(error).__name__, error, DEAD_LETTER_DIR_ENV)

    def _log(self, letters: Sequence[DeadLetter]) -> None:
        """The first letter of each shard, then a summary at most every ``SUMMARY_EVERY_S``."""
        for letter in letters:
            shard = letter.record.shard_id
            if shard not in self._seen:
                self._seen.add(shard)
                log.warning("dead letters of %s go to %s (first: %s, %s); later ones are summarised", shard,
                            self.path, letter.record.message_id, letter.reason[:300])
            else:
                self._unsummarised[shard] += 1
        if self._unsummarised and self._clock() - self._last_summary >= SUMMARY_EVERY_S:
            self._summary()

    def _summary(self) -> None:
        now = self._clock()
        counts = ", ".join(f"{shard}: {n}" for shard, n in sorted(self._unsummarised.items()))
        log.warning("%d more dead letters written to %s in the last %.0f s (%s); %d in all",
                    sum(self._unsummarised.values()), self.path, now - self._last_summary, counts, self.written)
        self._unsummarised.clear()
        self._last_summary = now

    def close(self) -> None:
        """Log the last summary (if letters were written since the last one) and close the file. Idempotent."""
        if self._unsummarised:
            self._summary()
        self._file.close()
