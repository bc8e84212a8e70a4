"""MemcachedBackingMap: map state values in memcached (pymemcache), with compare-and-set by ``gets``/``cas``.

Keys are ``namespace:<sha256 of the group values>`` (memcached keys are at most 250 bytes of printable ASCII, so
the readable form is hashed); values are the serializer's bytes (versioned JSON by default). Round trips per
bulk call:

- ``multi_get`` / ``multi_get_versioned``: one ``gets`` of all keys (memcached's CAS unique per key);
- ``multi_put``: one pipelined ``set`` of all keys;
- ``multi_put_if``: one pipelined write: ``cas`` for keys read with a CAS unique (refused with ``EXISTS`` or
  ``NOT_FOUND`` when another writer changed or evicted the key), ``add`` for keys read as absent (refused with
  ``NOT_STORED`` when another writer created it). Refused keys are read again and recomputed by the map, so
  concurrent writers never lose each other's updates.

The pipelined conditional write speaks memcached's text protocol on pymemcache's own connection (pymemcache has
no multi-key ``cas``). Memcached may evict values under memory pressure: size it so that it never does, or use
Redis; an evicted key reads as absent and its count starts again. The client is made on first use and closed by
``close()`` (idempotent). One thread per map; errors are retriable StateErrors naming the server.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, Sequence

from kinesis_spout.state.base import Key, StateError, Versioned
from kinesis_spout.state.serializer import JsonSerializer, Serializer, hashed_key

__all__ = ["MemcachedBackingMap", "MemcachedBackingMapFactory"]

_WRITTEN = {b"STORED": True, b"EXISTS": False, b"NOT_FOUND": False, b"NOT_STORED": False}


class MemcachedBackingMap:
    """A backing map in the memcached server ``server`` (``host:port``) under ``namespace``."""

    def __init__(self, server: str = "127.0.0.1:11211", *, namespace: str, serializer: Serializer | None = None,
                 timeout_s: float = 10.0) -> None:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"server must be 'host:port', got {server!r}")
        if not isinstance(namespace, str) or not namespace or any(c.isspace() for c in namespace) \
                or len(namespace) > 150:
            raise ValueError(f"namespace must be a non-empty string of at most 150 characters without spaces "
                             f"(memcached keys), got {namespace!r}")
        self.server = server
        self.namespace = namespace
        self.serializer: Serializer = serializer if serializer is not None else JsonSerializer()
        self.timeout_s = timeout_s
        self.round_trips = 0
        self._address = (host, int(port))
        self._client: Any = None

    @classmethod
    def factory(cls, server: str = "127.0.0.1:11211", *, namespace: str,
                serializer: Serializer | None = None) -> "MemcachedBackingMapFactory":
        cls(server, namespace=namespace, serializer=serializer)  # validate now, on the driver
        return MemcachedBackingMapFactory(server, namespace, serializer)

    def _mc(self) -> Any:
        if self._client is None:
            from pymemcache.client.base import Client

            self._client = Client(self._address, connect_timeout=self.timeout_s, timeout=self.timeout_s,
                                  no_delay=True)
        return self._client

    def _call(self, what: str, fn: Any) -> Any:
        from pymemcache.exceptions import MemcacheError

        try:
            self.round_trips += 1
            return fn(self._mc())
        except (MemcacheError, OSError) as exc:
            if self._client is not None:
                self._client.close()
            raise StateError(f"memcached at {self.server}: {what} failed: {type(exc).__name__}: {exc}",
                             retriable=not isinstance(exc, MemcacheError) or "Unexpected" in type(exc).__name__
                             ) from exc

    def _names(self, keys: Sequence[Key]) -> list[str]:
        return [hashed_key(self.namespace, k) for k in keys]

    def multi_get_versioned(self, keys: Sequence[Key]) -> list[Versioned]:
        if not keys:
            return []
        names = self._names(keys)
        got = self._call(f"gets of {len(names)} keys", lambda c: c.gets_many(names))
        out = []
        for name in names:
            hit = got.get(name)
            out.append(Versioned(None, None) if hit is None
                       else Versioned(self.serializer.loads(hit[0], name), hit[1]))
        return out

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        return [v.value for v in self.multi_get_versioned(keys)]

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        if not keys:
            return
        mapping = {n: self.serializer.dumps(v) for n, v in zip(self._names(keys), values)}
        failed = self._call(f"set of {len(mapping)} keys", lambda c: c.set_many(mapping, noreply=False))
        if failed:
            raise StateError(f"memcached at {self.server} did not store {len(failed)} keys (e.g. {failed[0]!r}); "
                             f"is a value larger than its item size limit (-I)?", retriable=True)

    def multi_put_if(self, keys: Sequence[Key], values: Sequence[Any], tokens: Sequence[Any]) -> list[bool]:
        if not keys:
            return []
        commands = []
        for name, value, token in zip(self._names(keys), values, tokens):
            data = self.serializer.dumps(value)
            if token is None:
                head = f"add {name} 0 0 {len(data)}\r\n"
            else:
                cas = token.decode() if isinstance(token, bytes) else str(int(token))
                head = f"cas {name} 0 0 {len(data)} {cas}\r\n"
            commands.append(head.encode() + data + b"\r\n")
        return list(self._call(f"compare-and-set of {len(commands)} keys", lambda c: _pipeline(c, commands)))

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()


def _pipeline(client: Any, commands: list[bytes]) -> list[bool]:
    """Send every storage command at once on ``client``'s connection and read one reply per command."""
    from pymemcache.client.base import _readline
    from pymemcache.exceptions import MemcacheUnknownError

    if client.sock is None:
        client._connect()
    sock: socket.socket = client.sock
    try:
        sock.sendall(b"".join(commands))
        buf = b""
        out = []
        for _ in commands:
            buf, line = _readline(sock, buf)
            if line not in _WRITTEN:
                raise MemcacheUnknownError(f"unexpected reply to a storage command: {line[:60]!r}")
            out.append(_WRITTEN[line])
        return out
    except Exception:
        client.close()
        raise


@dataclass(frozen=True)
class MemcachedBackingMapFactory:
    server: str
    namespace: str
    serializer: Serializer | None = None

    def make_backing_map(self) -> MemcachedBackingMap:
        return MemcachedBackingMap(self.server, namespace=self.namespace, serializer=self.serializer)
