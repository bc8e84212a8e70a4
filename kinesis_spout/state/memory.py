"""MemoryBackingMap: stored values in this process's memory (Trident's MemoryMapState), for tests and embedded use.

Maps made with the same ``name`` share one store (a process-wide registry), as executors of one job share a
database; nothing is shared between processes, so it does not suit Spark jobs whose Python workers are processes
of their own (use Redis or memcached there). Values go through the serializer, so the stored bytes are exactly
what a real backend would hold. It offers compare-and-set (a version per key) under one lock per store.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

from kinesis_spout.state.base import Key, Versioned
from kinesis_spout.state.serializer import JsonSerializer, Serializer, encode_key

__all__ = ["MemoryBackingMap", "MemoryBackingMapFactory"]


class _Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.data: dict[str, tuple[bytes, int]] = {}
        self.version = 0


_registry: dict[str, _Store] = {}
_registry_lock = threading.Lock()


def _store(name: str) -> _Store:
    with _registry_lock:
        return _registry.setdefault(name, _Store())


class MemoryBackingMap:
    """A backing map in memory under ``name`` (shared by every map of that name in this process).

    ``round_trips`` counts bulk calls, as a network backend would make them. Thread-safe: the store's lock is
    held for each bulk call.
    """

    def __init__(self, name: str = "default", *, serializer: Serializer | None = None) -> None:
        self.name = name
        self.serializer: Serializer = serializer if serializer is not None else JsonSerializer()
        self._store = _store(name)
        self.round_trips = 0

    @classmethod
    def factory(cls, name: str = "default", *, serializer: Serializer | None = None) -> "MemoryBackingMapFactory":
        return MemoryBackingMapFactory(name, serializer)

    @classmethod
    def drop(cls, name: str) -> None:
        """Forget the store ``name`` (tests)."""
        with _registry_lock:
            _registry.pop(name, None)

    def _key(self, key: Key) -> str:
        return encode_key(self.name, key)

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        return [v.value for v in self.multi_get_versioned(keys)]

    def multi_get_versioned(self, keys: Sequence[Key]) -> list[Versioned]:
        self.round_trips += 1
        names = [self._key(k) for k in keys]
        with self._store.lock:
            raw = [self._store.data.get(n) for n in names]
        return [Versioned(None, None) if r is None else Versioned(self.serializer.loads(r[0], n), r[1])
                for n, r in zip(names, raw)]

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        self.round_trips += 1
        encoded = [(self._key(k), self.serializer.dumps(v)) for k, v in zip(keys, values)]
        with self._store.lock:
            for name, raw in encoded:
                self._store.version += 1
                self._store.data[name] = (raw, self._store.version)

    def multi_put_if(self, keys: Sequence[Key], values: Sequence[Any], tokens: Sequence[Any]) -> list[bool]:
        self.round_trips += 1
        encoded = [(self._key(k), self.serializer.dumps(v)) for k, v in zip(keys, values)]
        done = []
        with self._store.lock:
            for (name, raw), token in zip(encoded, tokens):
                current = self._store.data.get(name)
                if (current[1] if current is not None else None) != token:
                    done.append(False)
                    continue
                self._store.version += 1
                self._store.data[name] = (raw, self._store.version)
                done.append(True)
        return done

    def raw(self) -> dict[str, bytes]:
        """A copy of the stored bytes by store key (tests)."""
        with self._store.lock:
            return {k: v[0] for k, v in self._store.data.items()}

    def corrupt(self, key: Key, raw: bytes) -> None:
        """Store ``raw`` under ``key`` as another program might (tests of decode errors)."""
        with self._store.lock:
            self._store.version += 1
            self._store.data[self._key(key)] = (raw, self._store.version)

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class MemoryBackingMapFactory:
    name: str = "default"
    serializer: Serializer | None = field(default=None)

    def make_backing_map(self) -> MemoryBackingMap:
        return MemoryBackingMap(self.name, serializer=self.serializer)
