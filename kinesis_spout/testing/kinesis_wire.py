"""What a :class:`~kinesis_spout.testing.faults.FaultProxy` knows of the Kinesis JSON API: which shard a call is
for (iterators remembered from the replies that handed them out, moto's decoded), listings with shards left out
(expired) or without hash key ranges, and ``PutRecords`` answers with chosen entries refused.

Shared state: :class:`IteratorShards` and :class:`ShardListing` are written by the proxy's handler threads and the
test's thread; each touches its state under its own lock. The functions are pure.
"""

from __future__ import annotations

import base64
import binascii
import collections
import json
import re
import threading

from kinesis_spout.testing.fault_plans import SHARD_FILTERED_OPERATIONS

__all__ = ["IteratorShards", "ShardListing", "decode_moto_iterator", "json_object", "merge_refused",
           "split_refused"]

_NEXT_ITERATOR = re.compile(rb'"NextShardIterator"\s*:\s*"([^"]+)"')
_SHARD_ID = re.compile(r"shardId-[0-9]+")
_MAX_REMEMBERED_ITERATORS = 100_000


def json_object(body: bytes) -> dict[str, object]:
    """A request or reply body as a JSON object; ``{}`` when it is empty, not JSON, or not an object."""
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def decode_moto_iterator(iterator: str) -> str | None:
    """The shard of a moto iterator (base64 of ``stream:shard:sequence``); None for others (kinesalite's)."""
    try:
        text = base64.b64decode(iterator.encode("ascii"), validate=False).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        return None
    parts = text.split(":")
    if len(parts) == 3 and _SHARD_ID.fullmatch(parts[1]):
        return parts[1]
    return None


class IteratorShards:
    """The shard of each iterator handed to a client through the proxy (the last 100,000), for faults limited to
    one shard: ``GetShardIterator`` names its shard, a ``GetRecords`` request only its iterator. Who calls: the
    proxy's handler threads; state under its own lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shards: collections.OrderedDict[str, str] = collections.OrderedDict()  # under _lock

    def shard_of_request(self, operation: str, body: bytes) -> str | None:
        """The shard a ``GetShardIterator`` or ``GetRecords`` request is for; None when it cannot be told."""
        request = json_object(body)
        if operation == "GetShardIterator":
            shard = request.get("ShardId")
            return shard if isinstance(shard, str) else None
        iterator = request.get("ShardIterator")
        return self.iterator_shard(iterator) if isinstance(iterator, str) else None

    def iterator_shard(self, iterator: str) -> str | None:
        """The shard of an iterator: remembered, or decoded from a moto iterator; None otherwise."""
        with self._lock:
            shard = self._shards.get(iterator)
        return shard if shard is not None else decode_moto_iterator(iterator)

    def observe_reply(self, operation: str, request_body: bytes, status: int, reply_body: bytes) -> None:
        """Remember the shard of each iterator a successful ``GetShardIterator`` or ``GetRecords`` reply hands to
        the client. Called by a handler thread for each forwarded call."""
        if status != 200 or operation not in SHARD_FILTERED_OPERATIONS:
            return
        if operation == "GetShardIterator":
            shard = json_object(request_body).get("ShardId")
            iterator = json_object(reply_body).get("ShardIterator")
            if isinstance(shard, str) and isinstance(iterator, str):
                self._remember(iterator, shard)
            return
        match = _NEXT_ITERATOR.search(reply_body)
        if match is None:
            return
        current = json_object(request_body).get("ShardIterator")
        if isinstance(current, str):
            try:
                next_iterator = json.loads(b'"' + match.group(1) + b'"')  # undo JSON escapes such as \\n
            except ValueError:
                return
            self._remember(next_iterator, self.iterator_shard(current))

    def _remember(self, iterator: str, shard: str | None) -> None:
        if not shard:
            return
        with self._lock:
            self._shards[iterator] = shard
            while len(self._shards) > _MAX_REMEMBERED_ITERATORS:
                self._shards.popitem(last=False)


class ShardListing:
    """How ``ListShards`` and ``DescribeStream`` replies are rewritten: expired shards left out, hash key ranges
    hidden. Who calls: the test's thread (``expire``, ``hide_hash_key_ranges``) and the handler threads
    (``rewrite``); state under its own lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._expired: set[str] = set()  # under _lock
        self._hide_hash_ranges = False  # under _lock

    def expire(self, shard_ids: set[str] | list[str]) -> None:
        """Leave these shards out of listings from now on."""
        with self._lock:
            self._expired.update(shard_ids)

    def hide_hash_key_ranges(self) -> None:
        """Leave ``HashKeyRange`` out of every shard of listings from now on."""
        with self._lock:
            self._hide_hash_ranges = True

    def rewrite(self, operation: str, reply: bytes) -> bytes:
        """A listing reply with the expired shards taken out, and the hash key ranges if hidden (other replies
        unchanged)."""
        with self._lock:
            expired, hide = set(self._expired), self._hide_hash_ranges
        if not expired and not hide or operation not in ("ListShards", "DescribeStream"):
            return reply
        doc = json_object(reply)
        holder = doc.get("StreamDescription") if operation == "DescribeStream" else doc
        if not isinstance(holder, dict) or not isinstance(holder.get("Shards"), list):
            return reply
        holder["Shards"] = [s for s in holder["Shards"] if not (isinstance(s, dict) and s.get("ShardId") in expired)]
        if hide:
            for shard in holder["Shards"]:
                if isinstance(shard, dict):
                    shard.pop("HashKeyRange", None)
        return json.dumps(doc).encode()


def split_refused(body: bytes, codes: dict[int, str]
                  ) -> tuple[dict[str, object], list[object], dict[int, str], list[object]]:
    """A ``PutRecords`` request split for refusals: the request, its entries, the refused ones (``codes`` limited
    to the entries there are) and the entries to forward."""
    request = json_object(body)
    records = request.get("Records")
    records = records if isinstance(records, list) else []
    refused = {i: code for i, code in codes.items() if i < len(records)}
    kept = [record for i, record in enumerate(records) if i not in refused]
    return request, records, refused, kept


def merge_refused(count: int, refused: dict[int, str], results: list[object], encryption: str) -> bytes:
    """The ``PutRecords`` answer for ``count`` entries: the refused ones' error entries in their places, the
    emulator's ``results`` for the others in order, and ``FailedRecordCount`` counting both."""
    merged: list[object] = []
    for i in range(count):
        if i in refused:
            merged.append({"ErrorCode": refused[i], "ErrorMessage": "injected fault: entry refused"})
        else:
            merged.append(results.pop(0))
    failed = sum(1 for r in merged if isinstance(r, dict) and r.get("ErrorCode"))
    return json.dumps({"FailedRecordCount": failed, "Records": merged, "EncryptionType": encryption}).encode()
