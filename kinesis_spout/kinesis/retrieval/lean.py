"""Lean GetRecords: botocore's signer, credentials, endpoint and HTTP pool, without its per-call machinery.

A GetRecords call through botocore costs about 0.7 ms of CPU before any record is touched (event hooks, endpoint
rules, the user-agent string, request serialisation, the generic response parser), which is most of what an idle
shard costs and a large part of a busy one. This module makes the same call with less:

- for the first call of a client, botocore builds and signs the request as usual, and a ``before-send`` hook notes
  the URL and the headers botocore chose (its endpoint resolution, its user agent) and stops it before it is sent;
- later calls build that request themselves, have botocore's own request signer sign it (same credentials, same
  refresh, same region and signing name), and send it on botocore's own HTTP session (same pool, proxies, TLS and
  time-outs);
- a 200 reply whose fields are all known is parsed with ``json.loads`` and ``base64``: every record field of the
  service model (``Data`` as bytes, ``ApproximateArrivalTimestamp`` as an aware datetime as the project's client
  parses it), ``NextShardIterator``, ``MillisBehindLatest`` and ``ChildShards`` as botocore returns them;
- anything else (an error status, a field this parser does not know, a timestamp that is not a number) is handed to
  botocore's parser for the operation, and an error is raised as the exception botocore would raise.

``ResponseMetadata`` is left out of lean replies (nothing here reads it). Who calls: :class:`ShardGetter` through
:func:`get_records`. Thread-safe: the captured request template is written once, under a lock.
"""

from __future__ import annotations

import binascii
import json
from datetime import datetime, timezone
from typing import Any

from kinesis_spout.kinesis.lean_call import Fallback, LeanCall

__all__ = ["Fallback", "LeanGetRecords", "enable", "get_records", "lean_of", "parse_reply"]

_RECORD_FIELDS = frozenset({"SequenceNumber", "ApproximateArrivalTimestamp", "Data", "PartitionKey",
                            "EncryptionType"})
_REPLY_FIELDS = frozenset({"Records", "NextShardIterator", "MillisBehindLatest", "ChildShards"})
_CHILD_FIELDS = frozenset({"ShardId", "ParentShards", "HashKeyRange"})
_RANGE_FIELDS = frozenset({"StartingHashKey", "EndingHashKey"})
_ATTRIBUTE = "_kinesis_spout_lean"
_b64decode = binascii.a2b_base64  # base64.b64decode without its wrapper: the same bytes, ValueError alike
_fromtimestamp = datetime.fromtimestamp
_UTC = timezone.utc


class LeanGetRecords(LeanCall):
    """GetRecords for one botocore Kinesis client (see the module docstring). ``calls`` and ``fallbacks`` count
    lean calls and the replies handed to botocore's parser."""

    def __init__(self, client: Any) -> None:
        super().__init__(client, "GetRecords")

    def __call__(self, shard_iterator: str, limit: int) -> dict[str, Any]:
        if not self.ready:
            self.capture(lambda: self._client.get_records(ShardIterator=shard_iterator, Limit=limit))
        return self.answer(self.request(shard_iterator, limit), parse_reply)

    def request(self, shard_iterator: str, limit: int) -> Any:
        """One signed GetRecords request; the raw ``AWSResponse`` (after a first call through botocore)."""
        return self.send(json.dumps({"ShardIterator": shard_iterator, "Limit": limit}).encode())


def parse_reply(content: bytes) -> dict[str, Any]:
    """A 200 GetRecords reply as botocore parses it (without ``ResponseMetadata``); ``Fallback`` (or a decoding
    error) when it holds something this parser does not know."""
    doc = json.loads(content)
    if not isinstance(doc, dict) or not doc.keys() <= _REPLY_FIELDS:
        raise Fallback
    if None in doc.values():  # botocore leaves out members sent as null
        doc = {k: v for k, v in doc.items() if v is not None}
    records = doc.get("Records")
    if records is not None:
        for r in records:
            if not r.keys() <= _RECORD_FIELDS or None in r.values():
                raise Fallback
            r["Data"] = _b64decode(r["Data"])
            arrived = r.get("ApproximateArrivalTimestamp")
            if arrived is not None:
                if not isinstance(arrived, (int, float)):
                    raise Fallback
                r["ApproximateArrivalTimestamp"] = _fromtimestamp(arrived, _UTC)
    for child in doc.get("ChildShards") or ():
        if not child.keys() <= _CHILD_FIELDS or None in child.values() or \
                not child.get("HashKeyRange", {}).keys() <= _RANGE_FIELDS:
            raise Fallback
    return doc


def lean_of(client: Any) -> LeanGetRecords | None:
    """The lean GetRecords :func:`enable` gave ``client``, or None for a client without one."""
    lean: LeanGetRecords | None = getattr(client, _ATTRIBUTE, None)
    return lean


def enable(client: Any) -> Any:
    """Give ``client`` a lean GetRecords (used by :func:`get_records`); returns the client."""
    setattr(client, _ATTRIBUTE, LeanGetRecords(client))
    return client


def get_records(client: Any, shard_iterator: str, limit: int) -> dict[str, Any]:
    """GetRecords through the client's lean path when it has one (clients of ``make_client``), else botocore's."""
    lean = getattr(client, _ATTRIBUTE, None)
    if lean is not None:
        reply: dict[str, Any] = lean(shard_iterator, limit)
        return reply
    plain: dict[str, Any] = client.get_records(ShardIterator=shard_iterator, Limit=limit)
    return plain
