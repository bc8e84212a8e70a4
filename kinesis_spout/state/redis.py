"""RedisBackingMap: map state values in Redis (redis-py), with compare-and-set by a server-side script.

Keys are ``namespace:<JSON list of the group values>`` (readable with ``redis-cli``); values are the serializer's
bytes (versioned JSON by default, see :mod:`kinesis_spout.state.serializer`). Round trips per bulk call:

- ``multi_get`` / ``multi_get_versioned``: one ``MGET``;
- ``multi_put``: one ``MSET`` (atomic);
- ``multi_put_if``: one ``EVALSHA`` of a Lua script that, atomically on the server, writes each key whose value
  is still the one read (or still absent) and reports which it wrote. Two executors updating one key therefore
  never lose each other's update: the loser reads again and recomputes.

The client is made on first use (the constructor does no I/O) and closed by ``close()`` (idempotent). A map
belongs to one thread (a Spark task); the factory is what travels to executors. Connection and server errors
are raised as retriable :class:`~kinesis_spout.state.base.StateError` naming the server (never its password).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from kinesis_spout.state.base import Key, StateError, Versioned
from kinesis_spout.state.serializer import JsonSerializer, Serializer, encode_key

__all__ = ["RedisBackingMap", "RedisBackingMapFactory"]

# KEYS: the keys; ARGV: for each key its expected value ("0" = absent, "1" + bytes = that value), then its new
# value. Returns 1 for each key written, 0 for each key another writer changed.
_CAS_SCRIPT = """
local out = {}
for i = 1, #KEYS do
  local expected = ARGV[2 * i - 1]
  local current = redis.call('GET', KEYS[i])
  local same
  if string.sub(expected, 1, 1) == '0' then
    same = (current == false)
  else
    same = (current ~= false and current == string.sub(expected, 2))
  end
  if same then
    redis.call('SET', KEYS[i], ARGV[2 * i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
"""


def redact(url: str) -> str:
    """The URL without its password."""
    return re.sub(r"://([^:/@]*):[^@/]*@", r"://\1:***@", url)


class RedisBackingMap:
    """A backing map in Redis under ``namespace``. ``round_trips`` counts the commands sent."""

    def __init__(self, url: str = "redis://127.0.0.1:6379/0", *, namespace: str,
                 serializer: Serializer | None = None, socket_timeout_s: float = 10.0) -> None:
        if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"url must be a redis://, rediss:// or unix:// URL, got {url!r}")
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"namespace must be a non-empty string (it prefixes every key), got {namespace!r}")
        self.url = url
        self.namespace = namespace
        self.serializer: Serializer = serializer if serializer is not None else JsonSerializer()
        self.socket_timeout_s = socket_timeout_s
        self.round_trips = 0
        self._client: Any = None
        self._script: Any = None

    @classmethod
    def factory(cls, url: str = "redis://127.0.0.1:6379/0", *, namespace: str,
                serializer: Serializer | None = None) -> "RedisBackingMapFactory":
        """A picklable factory (URL and namespace only) for the Spark operations."""
        cls(url, namespace=namespace, serializer=serializer)  # validate now, on the driver
        return RedisBackingMapFactory(url, namespace, serializer)

    def _redis(self) -> Any:
        if self._client is None:
            import redis

            self._client = redis.Redis.from_url(self.url, socket_timeout=self.socket_timeout_s,
                                                socket_connect_timeout=self.socket_timeout_s)
            self._script = self._client.register_script(_CAS_SCRIPT)
        return self._client

    def _call(self, what: str, fn: Any) -> Any:
        import redis

        try:
            self.round_trips += 1
            return fn(self._redis())
        except redis.RedisError as exc:
            raise StateError(f"Redis at {redact(self.url)}: {what} failed: {type(exc).__name__}: {exc}",
                             retriable=isinstance(exc, (redis.ConnectionError, redis.TimeoutError))) from exc

    def _names(self, keys: Sequence[Key]) -> list[str]:
        return [encode_key(self.namespace, k) for k in keys]

    def multi_get_versioned(self, keys: Sequence[Key]) -> list[Versioned]:
        if not keys:
            return []
        names = self._names(keys)
        raw = self._call(f"MGET of {len(names)} keys", lambda r: r.mget(names))
        return [Versioned(None, None) if b is None else Versioned(self.serializer.loads(b, n), b)
                for n, b in zip(names, raw)]

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        return [v.value for v in self.multi_get_versioned(keys)]

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        if not keys:
            return
        mapping = {n: self.serializer.dumps(v) for n, v in zip(self._names(keys), values)}
        self._call(f"MSET of {len(mapping)} keys", lambda r: r.mset(mapping))

    def multi_put_if(self, keys: Sequence[Key], values: Sequence[Any], tokens: Sequence[Any]) -> list[bool]:
        if not keys:
            return []
        names = self._names(keys)
        args: list[bytes] = []
        for value, token in zip(values, tokens):
            args.append(b"0" if token is None else b"1" + bytes(token))
            args.append(self.serializer.dumps(value))

        def run(r: Any) -> Any:
            return self._script(keys=names, args=args, client=r)

        return [bool(x) for x in self._call(f"compare-and-set of {len(names)} keys", run)]

    def delete_namespace(self) -> int:
        """Delete every key of this namespace (tests, resets); returns how many. Uses SCAN, never KEYS."""
        pattern = self.namespace.replace("[", "\\[").replace("*", "\\*").replace("?", "\\?") + ":*"

        def run(r: Any) -> int:
            names = list(r.scan_iter(match=pattern, count=1000))
            return int(r.delete(*names)) if names else 0

        return int(self._call("delete of the namespace", run))

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()


@dataclass(frozen=True)
class RedisBackingMapFactory:
    url: str
    namespace: str
    serializer: Serializer | None = None

    def make_backing_map(self) -> RedisBackingMap:
        return RedisBackingMap(self.url, namespace=self.namespace, serializer=self.serializer)
