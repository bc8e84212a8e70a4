"""How stored values and keys are encoded: a documented, versioned JSON format, and a pluggable serializer.

Format version 1, one UTF-8 JSON object per key::

    {"v": 1, "t": "transactional", "txid": 3, "val": 5}
    {"v": 1, "t": "opaque", "txid": 3, "curr": 6, "prev": 4}
    {"v": 1, "t": "plain", "val": 7}                           (NonTransactionalMap)

Transactional and opaque values may also hold who wrote their txid (see :mod:`kinesis_spout.state.values`):
``"run"`` (a string: the query or pipeline run), ``"call"`` (a string: one write of an operation) and ``"parts"``
(a list of partition numbers of that write). Each is left out when unknown, so a value written without them (by
an earlier version) reads as having none; readers that predate them ignore them.

Values must be JSON-encodable (numbers, strings, booleans, null, lists, objects). A stored value that cannot be
decoded (not JSON, another format, a newer version) raises :class:`~kinesis_spout.state.base.StateDecodeError`
naming the key, never a silent reset. Keys are the tuple of group-by values, encoded as a JSON list behind a
namespace: ``wordcount:["the"]``. Pure (standard library only).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from kinesis_spout.state.base import Key, StateDecodeError
from kinesis_spout.state.values import OpaqueValue, TransactionalValue

__all__ = ["FORMAT_VERSION", "JsonSerializer", "Serializer", "encode_key", "hashed_key"]

FORMAT_VERSION = 1
# One encoder each, made once: json.dumps with options builds a new encoder per call.
_VALUES = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_KEYS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_DECODER = json.JSONDecoder()


class Serializer(Protocol):
    """Turns stored values (TransactionalValue, OpaqueValue or a plain value) into bytes and back."""

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, raw: bytes, key: str) -> Any:
        """Decode ``raw``, stored under ``key``; raise StateDecodeError naming the key when it cannot."""
        ...


class JsonSerializer:
    """The default serializer: format version 1 above. Stateless and picklable."""

    def dumps(self, value: Any) -> bytes:
        if isinstance(value, TransactionalValue):
            doc: dict[str, Any] = {"v": FORMAT_VERSION, "t": "transactional", "txid": value.txid, "val": value.val}
            _writer(doc, value)
        elif isinstance(value, OpaqueValue):
            doc = {"v": FORMAT_VERSION, "t": "opaque", "txid": value.txid, "curr": value.curr, "prev": value.prev}
            _writer(doc, value)
        else:
            doc = {"v": FORMAT_VERSION, "t": "plain", "val": value}
        try:
            return _VALUES.encode(doc).encode()
        except (TypeError, ValueError) as exc:
            raise TypeError(f"state values must be JSON-encodable (numbers, strings, lists, dicts): {exc}; "
                            f"convert the value, or pass a serializer of your own") from exc

    def loads(self, raw: bytes, key: str) -> Any:
        try:
            doc = _DECODER.decode(bytes(raw).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise StateDecodeError(f"the value stored under {key!r} is not kinesis_spout state JSON ({exc}; starts "
                                   f"with {bytes(raw[:40])!r}); was it written by another program? Use another "
                                   f"namespace, or delete the key", key=key) from exc
        if not isinstance(doc, dict) or "v" not in doc or "t" not in doc:
            raise StateDecodeError(f"the value stored under {key!r} is JSON but not kinesis_spout state (no 'v' and "
                                   f"'t' fields): {bytes(raw[:60])!r}; use another namespace, or delete the key",
                                   key=key)
        if doc["v"] != FORMAT_VERSION:
            raise StateDecodeError(f"the value stored under {key!r} has format version {doc['v']!r}; this version of "
                                   f"kinesis_spout reads version {FORMAT_VERSION} only (upgrade kinesis_spout)",
                                   key=key)
        try:
            kind = doc["t"]
            if kind == "transactional":
                return TransactionalValue(_txid(doc["txid"]), doc["val"], *_written_by(doc))
            if kind == "opaque":
                return OpaqueValue(_txid(doc["txid"]), doc["curr"], doc["prev"], *_written_by(doc))
            if kind == "plain":
                return doc["val"]
        except (KeyError, TypeError, ValueError) as exc:
            raise StateDecodeError(f"the {kind!r} value stored under {key!r} is incomplete or malformed ({exc!r}): "
                                   f"{bytes(raw[:80])!r}", key=key) from exc
        raise StateDecodeError(f"the value stored under {key!r} has unknown type {kind!r} (expected transactional, "
                               f"opaque or plain)", key=key)


def _writer(doc: dict[str, Any], value: TransactionalValue | OpaqueValue) -> None:
    if value.run is not None:
        doc["run"] = value.run
    if value.call is not None:
        doc["call"] = value.call
        doc["parts"] = list(value.parts)


def _written_by(doc: dict[str, Any]) -> tuple[str | None, str | None, tuple[int, ...]]:
    run, call, parts = doc.get("run"), doc.get("call"), doc.get("parts", [])
    if run is not None and not isinstance(run, str):
        raise ValueError(f"run {run!r} is not a string")
    if call is not None and not isinstance(call, str):
        raise ValueError(f"call {call!r} is not a string")
    if not isinstance(parts, list) or any(isinstance(p, bool) or not isinstance(p, int) for p in parts):
        raise ValueError(f"parts {parts!r} is not a list of partition numbers")
    return run, call, tuple(parts)


def _txid(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"txid {value!r} is not a whole number >= 0")
    return value


def encode_key(namespace: str, key: Key) -> str:
    """``namespace:["v1",2]``: the readable store key of a group key."""
    try:
        body = _KEYS.encode(list(key))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"group key {key!r} must hold JSON-encodable scalars (strings, numbers, booleans, null): "
                        f"{exc}") from exc
    return f"{namespace}:{body}"


def hashed_key(namespace: str, key: Key) -> str:
    """``namespace:<sha256 hex>``: a store key of fixed length without spaces (memcached allows at most 250
    bytes of printable ASCII). The readable form is not kept: pass it to :func:`encode_key` to see it."""
    return f"{namespace}:{hashlib.sha256(encode_key('', key).encode()).hexdigest()}"
