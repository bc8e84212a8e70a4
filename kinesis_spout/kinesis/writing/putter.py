"""The one PutRecords writer of the project: records into a stream in calls within Kinesis' limits, refused entries
put again (alone), never the accepted ones.

Kinesis answers a ``PutRecords`` call entry by entry: an entry with an ``ErrorCode``
(``ProvisionedThroughputExceededException``, ``InternalFailure``) was not stored, the others were. The
:class:`RecordPutter` splits its items into calls of at most 500 records and 5 MiB (:func:`chunks`), and for each call
puts the refused entries again, after its :class:`~kinesis_spout.retry.RetryPolicy`'s delays, until none is left or
the policy's tries or deadline run out; then :class:`~kinesis_spout.errors.PutRecordsError` says which items were
written and which were not. A call that fails as a whole (throttled, a 5xx, a lost connection) is tried again the
same way when ``retry_calls`` is on and the error is retriable; otherwise it is raised at once. The calls go through
the client's lean PutRecords when it has one (:mod:`~kinesis_spout.kinesis.writing.lean_put`, clients of
``make_client``),
else through botocore's ``put_records``.

Who uses it: the Spark sink (:mod:`kinesis_spout.spark.sink`), the aggregating writer
(:mod:`kinesis_spout.kinesis.writing.aggregate_writer`) and the dead-letter stream
(:class:`~kinesis_spout.deadletters.KinesisDeadLetters`) and its replays.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from random import random as _uniform
from typing import Any, Callable, Generic, Sequence, TypeVar

from kinesis_spout.errors import KinesisError, PutRecordsError
from kinesis_spout.kinesis.aggregation import hash_key
from kinesis_spout.kinesis.botocore_errors import THROTTLING_CODES, translate
from kinesis_spout.kinesis.writing.lean_put import put_records
from kinesis_spout.kinesis.writing.limits import (
    MAX_BYTES_PER_CALL,
    MAX_PARTITION_KEY_LENGTH,
    MAX_RECORD_BYTES,
    MAX_RECORDS_PER_CALL,
    partition_key_problem,
)
from kinesis_spout.retry import Backoff, RetryPolicy

__all__ = ["MAX_BYTES_PER_CALL", "MAX_PARTITION_KEY_LENGTH", "MAX_RECORDS_PER_CALL", "MAX_RECORD_BYTES", "Landed",
           "PutCounters", "PutEntry", "RecordPutter", "chunks", "entry_problem", "put_size"]

T = TypeVar("T")

#: Where an AWS validation message names an entry of the call: ``records.N.member`` (N counted from 1).
_NAMED_ENTRY = re.compile(r"\brecords\.(\d+)\.member\b")
#: Entries named in a refused call's error, at most.
_NAMED_AT_MOST = 3


@dataclass(frozen=True, slots=True)
class PutEntry:
    """One record to put: its data, partition key and (optional) explicit hash key, a decimal number."""

    data: bytes
    partition_key: str
    explicit_hash_key: str | None = None

    @property
    def size(self) -> int:
        """What Kinesis counts against its limits (:func:`put_size`)."""
        return put_size(self.data, self.partition_key)


@dataclass(frozen=True, slots=True)
class Landed(Generic[T]):
    """An item Kinesis accepted, with the shard and sequence number it got."""

    item: T
    shard_id: str
    sequence_number: str


def put_size(data: bytes | bytearray, partition_key: str) -> int:
    """What Kinesis counts of a record against its limits: the data plus the partition key's UTF-8 bytes."""
    return len(data) + len(partition_key.encode("utf-8"))


def entry_problem(data: Any, partition_key: Any, explicit_hash_key: Any = None) -> str | None:
    """Why a record cannot be put as it is (no data, a bad key, over 1 MiB), naming the limit; None when it can.
    A partition key is measured as Kinesis measures it (:func:`~kinesis_spout.kinesis.writing.limits.key_length`: UTF-16
    code units). PURE; called by writers before anything is put, and by the putter to name the entries of a call
    Kinesis refused as a whole."""
    if data is None:
        return "its data is null (a record needs data, possibly empty)"
    if not isinstance(data, (bytes, bytearray)):
        return f"its data is {type(data).__name__}, not bytes"
    key_problem = partition_key_problem(partition_key)
    if key_problem is not None:
        return key_problem
    if explicit_hash_key is not None and (not isinstance(explicit_hash_key, str)
                                          or hash_key(partition_key, explicit_hash_key) is None
                                          or int(explicit_hash_key) >> 128):
        return f"its explicit hash key {explicit_hash_key!r} is not a decimal number from 0 to 2**128 - 1"
    size = put_size(data, partition_key)
    if size > MAX_RECORD_BYTES:
        return f"it has {size} bytes of data and partition key (Kinesis takes at most 1 MiB, {MAX_RECORD_BYTES})"
    return None


def chunks(items: Sequence[tuple[T, PutEntry]]) -> list[list[tuple[T, PutEntry]]]:
    """Split items into PutRecords calls of at most 500 records and 5 MiB, in order. PURE."""
    out: list[list[tuple[T, PutEntry]]] = []
    size = 0
    for item in items:
        n = item[1].size
        if not out or len(out[-1]) >= MAX_RECORDS_PER_CALL or size + n > MAX_BYTES_PER_CALL:
            out.append([])
            size = 0
        out[-1].append(item)
        size += n
    return out


@dataclass
class PutCounters:
    """What a putter did. Changed by the putter's caller thread under ``lock``; read under it (``snapshot()``).

    ``records_put`` accepted entries, ``records_retried`` entries sent again, ``records_failed`` entries given up on,
    ``throttled`` entries (or whole calls) refused for throughput, ``bytes_put`` data and partition keys accepted,
    ``calls`` PutRecords calls made."""

    records_put: int = 0
    records_retried: int = 0
    records_failed: int = 0
    throttled: int = 0
    bytes_put: int = 0
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def snapshot(self) -> dict[str, int]:
        """The counters now, by name."""
        with self.lock:
            return {"records_put": self.records_put, "records_retried": self.records_retried,
                    "records_failed": self.records_failed, "throttled": self.throttled, "bytes_put": self.bytes_put,
                    "calls": self.calls}


class RecordPutter(Generic[T]):
    """Puts ``(item, PutEntry)`` pairs into ``stream_name`` (see the module docstring).

    ``client`` is a boto3 Kinesis client (thread-safe, shared); ``policy`` paces the retries of refused entries
    (its ``max_attempts`` and ``deadline_s`` count per call of at most 500 records, from its first try);
    ``retry_calls`` also retries calls that failed as a whole with a retriable error. ``what`` names the records
    in messages ("dead letters"); ``name`` names one item in them ("row 17 of partition 2"): when a call is refused
    as a whole (an entry Kinesis will not take, which the writer's checks should have caught), the error names the
    entries Kinesis pointed at or :func:`entry_problem` finds, and why. ``sleep``, ``clock`` and ``random`` are
    injectable for tests. One caller thread per putter; ``counters`` may be read from any thread.
    """

    def __init__(self, stream_name: str, client: Any, policy: RetryPolicy, *, retry_calls: bool = True,
                 what: str = "records", name: Callable[[T], str] | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 random: Callable[[], float] = _uniform) -> None:
        self.stream_name = stream_name
        self.client = client
        self.policy = policy
        self.retry_calls = retry_calls
        self.what = what
        self.name = name
        self.counters = PutCounters()
        self._sleep = sleep
        self._clock = clock
        self._random = random

    def put(self, items: Sequence[tuple[T, PutEntry]]) -> list[Landed[T]]:
        """Put every item, call by call in order; returns those accepted with where they landed, in acceptance
        order. Raises :class:`PutRecordsError` (``written``: the items accepted, this call's and earlier ones';
        ``refused``: the rest, the chunks not tried included) when a call's entries stay refused or it fails."""
        landed: list[Landed[T]] = []
        parts = chunks(items)
        for n, chunk in enumerate(parts):
            try:
                landed += self._put_chunk(chunk)
            except PutRecordsError as exc:
                rest = [item for part in parts[n + 1:] for item, _ in part]
                raise PutRecordsError(str(exc), written=[x.item for x in landed] + list(exc.written),
                                      refused=list(exc.refused) + rest, codes=exc.codes, attempts=exc.attempts,
                                      code=exc.code, retriable=exc.retriable) from exc.__cause__
        return landed

    def _put_chunk(self, chunk: list[tuple[T, PutEntry]]) -> list[Landed[T]]:
        """One call's entries; refused ones put again (alone) after the policy's delays."""
        landed: list[Landed[T]] = []
        todo = chunk
        backoff = Backoff(self.policy, random=self._random, clock=self._clock, sleep=self._sleep)
        backoff.start()  # the policy's deadline counts from the call's first try
        while True:
            attempt = backoff.failures + 1
            codes: set[str] = set()
            try:
                reply = self._call([(entry.data, entry.partition_key, entry.explicit_hash_key) for _, entry in todo])
            except KinesisError as exc:
                if not (self.retry_calls and exc.retriable):
                    self._count(failed=len(todo))
                    raise PutRecordsError(f"PutRecords of {len(todo)} {self.what} into stream {self.stream_name!r} "
                                          f"failed: {exc}{self._culprits(todo, exc)}", written=[x.item for x in landed],
                                          refused=[item for item, _ in todo], codes=[exc.code or "Unknown"],
                                          attempts=attempt, code=exc.code, retriable=exc.retriable) from exc
                codes.add(exc.code or "Unknown")
                self._count(throttled=len(todo) if exc.code in THROTTLING_CODES else 0)
            else:
                refused: list[tuple[T, PutEntry]] = []
                nbytes = throttled = 0
                for (item, entry), result in zip(todo, reply.get("Records", []), strict=True):
                    code = result.get("ErrorCode")
                    if code:
                        refused.append((item, entry))
                        codes.add(code)
                        throttled += code in THROTTLING_CODES
                    else:
                        landed.append(Landed(item, result.get("ShardId", ""), result.get("SequenceNumber", "")))
                        nbytes += entry.size
                self._count(put=len(todo) - len(refused), nbytes=nbytes, throttled=throttled)
                todo = refused
                if not todo:
                    return landed
            failure = backoff.failed()
            if failure.stop is not None:
                self._count(failed=len(todo))
                limit = (f"{attempt} times in {failure.elapsed_s:.1f} s (deadline {self.policy.deadline_s:g} s)"
                         if self.policy.past_deadline(failure.elapsed_s, failure.pause_s) else f"{attempt} times")
                raise PutRecordsError(f"stream {self.stream_name!r} refused {len(todo)} {self.what} {limit} "
                                      f"({', '.join(sorted(codes))})", written=[x.item for x in landed],
                                      refused=[item for item, _ in todo], codes=sorted(codes), attempts=attempt)
            self._count(retried=len(todo))
            backoff.wait(failure.pause_s)

    def _culprits(self, todo: list[tuple[T, PutEntry]], exc: KinesisError) -> str:
        """For a call refused as a whole and not to be retried: the entries Kinesis named (``records.N.member``)
        and those :func:`entry_problem` finds, named and with why ("" when there are none): the call's error alone
        (kinesis-local's "Partition key must be between 1 and 256 in length") says neither which nor why."""
        if exc.retriable:
            return ""
        named = {int(n) - 1 for n in _NAMED_ENTRY.findall(str(exc)) if 0 < int(n) <= len(todo)}
        found: list[str] = []
        for i, (item, entry) in enumerate(todo):
            problem = entry_problem(entry.data, entry.partition_key, entry.explicit_hash_key)
            if problem is None and i not in named:
                continue
            if len(found) == _NAMED_AT_MOST:
                found.append("and more")
                break
            who = f"{self.name(item)} (entry {i} of the call)" if self.name is not None else f"entry {i} of the call"
            found.append(f"{who}: {problem or 'the entry Kinesis names'}")
        return "; " + "; ".join(found) if found else ""

    def _count(self, *, put: int = 0, nbytes: int = 0, throttled: int = 0, failed: int = 0, retried: int = 0) -> None:
        c = self.counters
        with c.lock:
            c.records_put += put
            c.bytes_put += nbytes
            c.throttled += throttled
            c.records_failed += failed
            c.records_retried += retried

    def _call(self, records: list[tuple[bytes, str, str | None]]) -> dict[str, Any]:
        with self.counters.lock:
            self.counters.calls += 1
        try:
            reply: dict[str, Any] = put_records(self.client, self.stream_name, records)
        except Exception as exc:
            raise translate(exc, f"PutRecords of {len(records)} {self.what} into {self.stream_name!r}") from exc
        return reply
