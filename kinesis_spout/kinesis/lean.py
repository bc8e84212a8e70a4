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
import threading
from datetime import datetime, timezone
from typing import Any

from botocore.awsrequest import AWSRequest
from botocore.endpoint import convert_to_response_dict

__all__ = ["Fallback", "LeanGetRecords", "enable", "get_records", "parse_reply"]

_RECORD_FIELDS = frozenset({"SequenceNumber", "ApproximateArrivalTimestamp", "Data", "PartitionKey",
                            "EncryptionType"})
_REPLY_FIELDS = frozenset({"Records", "NextShardIterator", "MillisBehindLatest", "ChildShards"})
_CHILD_FIELDS = frozenset({"ShardId", "ParentShards", "HashKeyRange"})
_RANGE_FIELDS = frozenset({"StartingHashKey", "EndingHashKey"})
_ATTRIBUTE = "_kinesis_spout_lean"
_b64decode = binascii.a2b_base64  # base64.b64decode without its wrapper: the same bytes, ValueError alike
_fromtimestamp = datetime.fromtimestamp
_UTC = timezone.utc


class _Captured(Exception):
    """Raised by the ``before-send`` hook once botocore's first request was noted: nothing is sent."""


class Fallback(Exception):
    """The reply holds something the lean parser does not know: botocore parses it."""


class LeanGetRecords:
    """GetRecords for one botocore Kinesis client (see the module docstring). ``calls`` and ``fallbacks`` count
    lean calls and the replies handed to botocore's parser."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._template: tuple[str, dict[str, str]] | None = None  # URL and headers of botocore's own request
        self._hooked = False
        self._capturing = threading.local()  # set while the lean path asks botocore for its request
        self.calls = 0
        self.fallbacks = 0

    def __call__(self, shard_iterator: str, limit: int) -> dict[str, Any]:
        if self._template is None:
            return self._through_botocore(shard_iterator, limit)
        response = self.send(shard_iterator, limit)
        if response.status_code == 200:
            try:
                return parse_reply(response.content)
            except (Fallback, ValueError, KeyError, TypeError, AttributeError):
                pass
        self.fallbacks += 1
        return self.botocore_parse(response)

    def send(self, shard_iterator: str, limit: int) -> Any:
        """One signed GetRecords request on botocore's HTTP session; the raw ``AWSResponse`` (needs the template
        of a first call through botocore)."""
        assert self._template is not None, "the first GetRecords of a client goes through botocore"
        url, headers = self._template
        body = json.dumps({"ShardIterator": shard_iterator, "Limit": limit}).encode()
        request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
        client = self._client
        client._request_signer.sign("GetRecords", request)
        response = client._endpoint.http_session.send(request.prepare())
        self.calls += 1
        return response

    def _through_botocore(self, shard_iterator: str, limit: int) -> dict[str, Any]:
        """The first call: botocore builds and signs the request, a ``before-send`` hook keeps its URL and headers as
        the template and stops it there (so botocore's parser never sees a reply), then the call is made lean."""
        with self._lock:
            if not self._hooked:
                self._client.meta.events.register("before-send.kinesis.GetRecords", self._capture)
                self._hooked = True
        self._capturing.active = True
        try:
            self._client.get_records(ShardIterator=shard_iterator, Limit=limit)
        except _Captured:
            pass
        finally:
            self._capturing.active = False
        if self._template is None:  # pragma: no cover - the hook always captures the first request
            raise RuntimeError("GetRecords: botocore's request was not captured")
        return self(shard_iterator, limit)

    def _capture(self, request: Any, **_: Any) -> None:
        if not getattr(self._capturing, "active", False):
            return  # a plain client.get_records() of someone else: botocore sends it
        keep = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()
                if k.lower() in ("content-type", "x-amz-target", "user-agent")}
        with self._lock:
            if self._template is None:
                self._template = (request.url, keep)
        raise _Captured

    def botocore_parse(self, response: Any) -> dict[str, Any]:
        """What botocore makes of ``response``: the parsed reply, or the exception it raises for an error."""
        client = self._client
        model = client.meta.service_model.operation_model("GetRecords")
        factory = client._endpoint._response_parser_factory
        parser = factory.create_parser(model.metadata["protocol"])
        parsed: dict[str, Any] = parser.parse(convert_to_response_dict(response, model), model.output_shape)
        if response.status_code >= 300:
            code = parsed.get("Error", {}).get("Code")
            raise client.exceptions.from_code(code)(parsed, "GetRecords")
        return parsed


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
