"""Lean PutRecords: botocore's signer, credentials, endpoint and HTTP pool, without its per-record machinery.

Through botocore a PutRecords call of 500 records costs about 15 µs of CPU per record before anything is sent:
parameter validation, the generic serialiser (a base64 call and several dictionaries per record) and the generic
response parser walk every record. This module makes the same call with less, the way
:mod:`~kinesis_spout.kinesis.retrieval.lean` makes GetRecords:

- for the first call of a client, botocore builds and signs the request as usual, and a ``before-send`` hook notes
  the URL and the headers botocore chose (its endpoint resolution, its user agent) and stops it before it is sent;
- later calls write the JSON body themselves (one ``json.dumps`` of the whole call, each record's data base64-encoded
  by ``binascii``), have botocore's own request signer sign it (same credentials, same refresh, same region and
  signing name) and send it on botocore's own HTTP session (same pool, proxies, TLS and time-outs);
- a 200 reply whose fields are all known is parsed with ``json.loads``; anything else (an error status, a field this
  parser does not know) goes to botocore's parser for the operation, and an error is raised as the exception botocore
  would raise (so :func:`~kinesis_spout.kinesis.botocore_errors.translate` and the retries see what they always saw).

``ResponseMetadata`` is left out of lean replies (nothing here reads it). Who calls:
:class:`~kinesis_spout.kinesis.writing.putter.RecordPutter` through :func:`put_records` (the one PutRecords writer;
this is
only its transport). Thread-safe: the captured request template is written once, under a lock.
"""

from __future__ import annotations

import binascii
import json
from typing import Any, Sequence

from kinesis_spout.kinesis.lean_call import Fallback, LeanCall

__all__ = ["Fallback", "LeanPutRecords", "botocore_records", "enable", "lean_of", "parse_reply", "put_records",
           "request_body"]

_REPLY_FIELDS = frozenset({"FailedRecordCount", "Records", "EncryptionType"})
_RESULT_FIELDS = frozenset({"SequenceNumber", "ShardId", "ErrorCode", "ErrorMessage"})
_ATTRIBUTE = "_kinesis_spout_lean_put"
_b64encode = binascii.b2a_base64
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

#: One record of a call: (data, partition key, explicit hash key or None).
Entry = tuple[bytes, str, "str | None"]


def request_body(stream_name: str, entries: Sequence[Entry]) -> bytes:
    """The JSON body of a PutRecords call (what botocore would send for the same records). PURE."""
    records: list[dict[str, str]] = []
    append = records.append
    for data, partition_key, explicit_hash_key in entries:
        encoded = _b64encode(data, newline=False).decode("ascii")
        if explicit_hash_key is None:
            append({"Data": encoded, "PartitionKey": partition_key})
        else:
            append({"Data": encoded, "PartitionKey": partition_key, "ExplicitHashKey": explicit_hash_key})
    return _dumps({"StreamName": stream_name, "Records": records}).encode("utf-8")


def parse_reply(content: bytes, expected: int) -> dict[str, Any]:
    """A 200 PutRecords reply as botocore parses it (without ``ResponseMetadata``); :class:`Fallback` (or a decoding
    error) when it holds something this parser does not know or answers another number of records."""
    doc = json.loads(content)
    if not isinstance(doc, dict) or not doc.keys() <= _REPLY_FIELDS:
        raise Fallback
    records = doc.get("Records")
    if not isinstance(records, list) or len(records) != expected:
        raise Fallback
    for r in records:
        if not r.keys() <= _RESULT_FIELDS or None in r.values():
            raise Fallback
    if doc.get("EncryptionType", "") is None:
        del doc["EncryptionType"]  # botocore leaves out members sent as null
    return doc


class LeanPutRecords(LeanCall):
    """PutRecords for one botocore Kinesis client (see the module docstring). ``calls`` and ``fallbacks`` count
    lean calls and the replies handed to botocore's parser (read them from any thread; written by callers)."""

    def __init__(self, client: Any) -> None:
        super().__init__(client, "PutRecords")

    def __call__(self, stream_name: str, entries: Sequence[Entry]) -> dict[str, Any]:
        """Put ``entries`` in one call; Kinesis' answer (``Records`` in the order of ``entries``), or the exception
        botocore raises for an error reply or a failed connection."""
        if not self.ready:
            first = botocore_records(entries[:1])
            self.capture(lambda: self._client.put_records(StreamName=stream_name, Records=first))
        return self.answer(self.send(request_body(stream_name, entries)),
                           lambda content: parse_reply(content, len(entries)))


def botocore_records(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """``entries`` as botocore's ``put_records`` takes them (``ExplicitHashKey`` only where there is one)."""
    return [{"Data": d, "PartitionKey": pk, **({} if h is None else {"ExplicitHashKey": h})} for d, pk, h in entries]


def enable(client: Any) -> Any:
    """Give ``client`` a lean PutRecords (used by :func:`put_records`); returns the client."""
    setattr(client, _ATTRIBUTE, LeanPutRecords(client))
    return client


def lean_of(client: Any) -> LeanPutRecords | None:
    """The lean PutRecords :func:`enable` gave ``client`` (its ``fallbacks`` count the calls botocore answered), or
    None for a client without one."""
    lean: LeanPutRecords | None = getattr(client, _ATTRIBUTE, None)
    return lean


def put_records(client: Any, stream_name: str, entries: Sequence[Entry]) -> dict[str, Any]:
    """PutRecords of ``entries`` through the client's lean path when it has one (clients of ``make_client``), else
    botocore's ``put_records`` (any other client, stand-ins of tests included)."""
    lean = getattr(client, _ATTRIBUTE, None)
    if lean is not None:
        reply: dict[str, Any] = lean(stream_name, entries)
        return reply
    plain: dict[str, Any] = client.put_records(StreamName=stream_name, Records=botocore_records(entries))
    return plain
