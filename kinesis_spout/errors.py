"""The one exception tree of kinesis_spout.

Every error the library raises is a :class:`SpoutError`. Errors from botocore and kazoo are wrapped at the I/O
boundary (``raise KinesisError(...) from exc``) so callers catch one family. ``retriable`` says whether trying the
same thing again later may succeed; the library's own loops retry only retriable errors, and only a bounded number
of times.
"""

from __future__ import annotations

from typing import Any, Sequence


class SpoutError(Exception):
    """Base class of every error raised by kinesis_spout."""

    retriable: bool = False

    def __init__(self, message: str, *, retriable: bool | None = None) -> None:
        super().__init__(message)
        if retriable is not None:
            self.retriable = retriable


class ConfigError(SpoutError, ValueError):
    """A configuration value is missing, of the wrong type, or out of range. The message names the field."""


class SpoutStateError(SpoutError, RuntimeError):
    """A method was called in the wrong state, e.g. ``next_tuple()`` before ``open()`` or after ``close()``."""


class KinesisError(SpoutError):
    """A Kinesis call failed. ``code`` is the AWS error code when there is one."""

    def __init__(self, message: str, *, code: str | None = None, retriable: bool | None = None) -> None:
        super().__init__(message, retriable=retriable)
        self.code = code


class StreamNotFoundError(KinesisError):
    """The stream (or shard) does not exist, or is being deleted."""


class ThrottledError(KinesisError):
    """Kinesis refused the call for throughput or rate limits; the reader backs off and tries again."""

    retriable = True


class PutRecordsError(KinesisError):
    """Records could not be put into a stream: PutRecords kept refusing some entries (or failing as a whole) until
    the writer's attempts or deadline ran out. ``written`` holds the items Kinesis accepted before giving up (they
    are in the stream), ``refused`` those it did not (not written: put them again, or let the task fail and be
    retried), ``codes`` the error codes of the last refusals and ``attempts`` the calls made for the last chunk.
    ``retriable`` is False when a call was refused as a whole for what it holds (the same call fails again)."""

    retriable = True

    def __init__(self, message: str, *, written: Sequence[Any] = (), refused: Sequence[Any] = (),
                 codes: Sequence[str] = (), attempts: int = 0, code: str | None = None,
                 retriable: bool | None = None) -> None:
        super().__init__(message, code=code, retriable=retriable)
        self.written = tuple(written)
        self.refused = tuple(refused)
        self.codes = tuple(codes)
        self.attempts = attempts


class InvalidRecordError(SpoutError, ValueError):
    """A record cannot be put into Kinesis as it is: no data, a partition key empty or over 256 UTF-16 code units, an
    explicit hash key that is not a number below 2**128, or over the 1 MiB record limit. The message names the record
    (its row), the limit and the fix; nothing of the batch it belongs to was put when the writer checks first."""


class CheckpointError(SpoutError):
    """A checkpoint could not be read, parsed or written. The message names the shard and where it is stored."""


class CheckpointConflict(CheckpointError):
    """Another writer stored a checkpoint at or beyond ours; our (lower) write lost and was not applied."""


class BatchFailedError(SpoutError):
    """A batch of ``SpoutPipeline`` failed every try: ``process()`` (or the write of its output) raised, or answered
    in a form it does not accept, ``tries`` times in a row, and its ``batch_retry_limit`` or
    ``batch_retry_deadline_s`` ran out, so ``run()`` ended. None of the batch's records was acked, failed or
    dead-lettered: the checkpoints stay before them and the next run reads them again. ``batch_id`` is the batch's
    id (its txid in exactly-once mode), ``elapsed_s`` the time from its first failure to its last; the last try's
    error is the ``__cause__``, and ``retriable`` is that error's own flag (False for errors without one)."""

    def __init__(self, message: str, *, batch_id: int, tries: int, elapsed_s: float,
                 retriable: bool | None = None) -> None:
        super().__init__(message, retriable=retriable)
        self.batch_id = batch_id
        self.tries = tries
        self.elapsed_s = elapsed_s


class DeadLetterError(SpoutError):
    """Dead letters could not be written. ``written`` holds the letters of the failed call that were written
    nonetheless (a partial success); the others are retried. Raised by ``next_batch``/``next_tuple`` once writes
    kept failing for ``dead_letter_deadline_s``; nothing is dropped meanwhile (the checkpoint waits)."""

    retriable = True

    def __init__(self, message: str, *, written: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.written = tuple(written)


class DeadLetterStormError(DeadLetterError):
    """The spout stopped: too many records were dead-lettered (``max_dead_letters_in_a_row`` in a row, or more
    than ``max_dead_letter_ratio`` of the last ``dead_letter_window`` records read). Raised by every later
    ``next_batch``/``next_tuple``. The message names the likely cause (the scheme, when the letters are records it
    could not decode), the stream and shards, the counts, the setting to change and where the restart resumes: the
    letters of the run that tripped the rule were not written and their records are not checkpointed past, so a
    restart reads them again. ``rule`` names the setting that tripped; not retriable (the same records trip it
    again until the scheme or the setting changes)."""

    retriable = False

    def __init__(self, message: str, *, rule: str, letters: int, shard_ids: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.rule = rule
        self.letters = letters
        self.shard_ids = tuple(shard_ids)


class ServerStartError(SpoutError):
    """A local server (ZooKeeper, moto, an emulator) used by the testing fixtures or the demo did not start."""


class LeaseLost(CheckpointConflict):
    """A checkpoint write was refused because this worker no longer holds the shard's lease (another worker took
    it: this one was cut off or paused past its ZooKeeper session). The spout stops emitting the shard."""

    def __init__(self, message: str, *, shard_id: str) -> None:
        super().__init__(message)
        self.shard_id = shard_id


class LeaseError(SpoutError):
    """Shard leases cannot work as configured: e.g. two live workers with one ``worker_id``, or a lease znode
    that cannot be read. The message names the znode or the setting."""


class RetryError(SpoutError):
    """A retried call gave up: its tries ran out or its deadline passed. The message names what was tried, how
    many times and for how long; ``last`` (also the ``__cause__``) is the last try's error, and ``retriable`` is
    that error's (trying again later may still help)."""

    def __init__(self, message: str, *, last: BaseException, attempts: int, elapsed_s: float) -> None:
        super().__init__(message, retriable=bool(getattr(last, "retriable", False)))
        self.last = last
        self.attempts = attempts
        self.elapsed_s = elapsed_s
