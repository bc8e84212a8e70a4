"""Kinesis' limits on what is put, and the one function that measures a partition key as Kinesis does.

Kinesis counts a partition key's length as Java counts a string's: in UTF-16 code units, so a character beyond
U+FFFF (an emoji, many CJK extension characters) counts 2, and a key of 200 emoji is 400 long, over the limit of
256. Counting code points (Python's ``len``) lets such a key through, and Kinesis then refuses the whole PutRecords
call. Every writer measures keys with :func:`key_length` (the putter's per-record check, the sink's Arrow batch
check and its ``partitionKey`` option, the aggregator's outer key), and says what is wrong with
:func:`partition_key_problem`.

PURE: standard library only. Who uses it: :mod:`~kinesis_spout.kinesis.writing.putter`,
:mod:`~kinesis_spout.kinesis.writing.aggregator`, :mod:`kinesis_spout.spark.sink`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_BYTES_PER_CALL", "MAX_PARTITION_KEY_LENGTH", "MAX_RECORDS_PER_CALL", "MAX_RECORD_BYTES", "key_length",
           "partition_key_problem"]

#: Records of one PutRecords call.
MAX_RECORDS_PER_CALL = 500
#: Bytes (data and partition keys) of one PutRecords call.
MAX_BYTES_PER_CALL = 5 << 20
#: One record: its data plus its partition key's UTF-8 bytes.
MAX_RECORD_BYTES = 1 << 20
#: A partition key's length, in UTF-16 code units (see :func:`key_length`).
MAX_PARTITION_KEY_LENGTH = 256


def key_length(key: str) -> int:
    """The length of ``key`` as Kinesis counts it: UTF-16 code units, a character beyond U+FFFF counting 2 (Java's
    ``String.length()``). PURE."""
    if key.isascii():
        return len(key)
    return len(key.encode("utf-16-le", "surrogatepass")) >> 1


def partition_key_problem(key: Any) -> str | None:
    """Why ``key`` cannot be a partition key (not a string, empty, longer than 256 as :func:`key_length` counts, not
    encodable as UTF-8), naming the limit; None when it can. PURE; called by the writers' checks."""
    if not isinstance(key, str) or not key:
        return (f"its partition key is null or empty (Kinesis takes 1 to {MAX_PARTITION_KEY_LENGTH} UTF-16 code "
                f"units)")
    length = key_length(key)
    if length > MAX_PARTITION_KEY_LENGTH:
        return (f"its partition key has {length} UTF-16 code units (Kinesis takes at most {MAX_PARTITION_KEY_LENGTH}, "
                f"counted as Java counts a string's length: a character beyond U+FFFF, such as an emoji, counts 2)")
    if not key.isascii():
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            return "its partition key holds a lone surrogate (not valid Unicode: Kinesis takes UTF-8 text)"
    return None
