"""Which shards' records of a ``readMode=driver`` batch share a partition: :func:`pack`.

A Spark task costs tens of milliseconds of Python and JVM work whatever it holds (a worker round trip, the Arrow
decode set-up, the task's scheduling), so one partition per shard made a caught-up batch of a 16-shard stream 16
tasks of a few records each. The driver already holds the records, so it can pack them: shards are taken in order
and added to the current partition while it stays within ``max_records`` records and ``max_bytes`` bytes. A
shard's records are never split (a partition holds each of its shards' records in order), so a shard with more
than the limits is a partition alone.

Pure logic, no I/O: the driver's reader (:mod:`kinesis_spout.spark.source.driver`) calls it with what it kept.
"""

from __future__ import annotations

from typing import Sequence, TypeVar

__all__ = ["PACK_MAX_BYTES", "pack"]

#: A partition the driver packs stays under this many bytes of records (data and partition keys), whatever the
#: record limit: a partition travels from the driver to its task in one piece.
PACK_MAX_BYTES = 32 << 20

T = TypeVar("T")


def pack(items: Sequence[tuple[T, int, int]], max_records: int, max_bytes: int = PACK_MAX_BYTES) -> list[list[T]]:
    """Group ``items`` (``(key, records, bytes)``, in the order they are given) into runs whose records add up to
    at most ``max_records`` and bytes to at most ``max_bytes``; an item over either limit is a run alone. Keeps the
    order: the runs, concatenated, are ``items``' keys. Items with no records still get a place (they are kept as
    they come). Raises ``ValueError`` when ``max_records`` or ``max_bytes`` is below 1."""
    if max_records < 1 or max_bytes < 1:
        raise ValueError(f"pack: limits must be at least 1, got {max_records} records and {max_bytes} bytes")
    runs: list[list[T]] = []
    run: list[T] = []
    records = size = 0
    for key, n, b in items:
        if run and (records + n > max_records or size + b > max_bytes):
            runs.append(run)
            run, records, size = [], 0, 0
        run.append(key)
        records += n
        size += b
    if run:
        runs.append(run)
    return runs
