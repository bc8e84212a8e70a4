"""CachedMap: an LRU cache of stored values in front of a backing map (Trident's CachedMap).

Reads are served from the cache where it has the key, the misses in one bulk read; writes go through to the
backing map and then into the cache. Over a backing map with compare-and-set
(:class:`~kinesis_spout.state.base.ConditionalBackingMap`), ``CachedMap(...)`` makes a
:class:`ConditionalCachedMap`, which offers compare-and-set as well: it caches each value with the token it was read
with, serves a versioned read from the cache only when it knows the token, and drops the entry of a key whose
conditional write was lost (another writer changed it), so the map state reads it again from the store. So the
cache never makes concurrent writers of one key lose each other's updates when the store can compare-and-set;
over a store without it, the cache is safe only when this process is the one writer of its keys (Trident's
assumption: keys are partitioned to tasks). One thread at a time (the map state's): the cache is owned by it. Pure
logic.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Sequence

from kinesis_spout.state.base import BackingMap, ConditionalBackingMap, Key, Versioned, as_keys

__all__ = ["CachedMap", "ConditionalCachedMap"]

_UNKNOWN = object()  # the token of a cached value written by this cache: the store's new token is not known


class CachedMap:
    """A write-through LRU of at most ``size`` stored values over ``backing``. ``hits``/``misses`` count reads.

    Over a ConditionalBackingMap, constructing a CachedMap gives a :class:`ConditionalCachedMap`."""

    def __new__(cls, backing: BackingMap | None = None, size: int = 1000) -> "CachedMap":
        if cls is CachedMap and isinstance(backing, ConditionalBackingMap):
            return super().__new__(ConditionalCachedMap)
        return super().__new__(cls)

    def __init__(self, backing: BackingMap, size: int = 1000) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a whole number >= 1, got {size!r}")
        self.backing = backing
        self.size = size
        self._cache: OrderedDict[Key, tuple[Any, Any]] = OrderedDict()  # key -> (value, token or _UNKNOWN)
        self.hits = 0
        self.misses = 0

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        """The stored values of ``keys``: cached ones from the cache, the others in one bulk read (then cached)."""
        return [versioned.value for versioned in self._lookup(keys, need_token=False)]

    def _lookup(self, keys: Sequence[Key], need_token: bool) -> list[Versioned]:
        """The values of ``keys`` with their tokens: from the cache (with ``need_token``, only where it knows the
        token), the others in one bulk read (:meth:`_read`, then cached); counts hits and misses."""
        keys = as_keys(keys)
        out: list[Versioned] = [Versioned(None, None)] * len(keys)
        missing: list[int] = []
        for i, key in enumerate(keys):
            cached = self._cache.get(key)
            if cached is not None and not (need_token and cached[1] is _UNKNOWN):
                self._cache.move_to_end(key)
                out[i] = Versioned(*cached)
            else:
                missing.append(i)
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            for i, versioned in zip(missing, self._read([keys[i] for i in missing])):
                out[i] = versioned
                self._remember(keys[i], versioned.value, versioned.token)
        return out

    def _read(self, keys: Sequence[Key]) -> list[Versioned]:
        return [Versioned(v, _UNKNOWN) for v in self.backing.multi_get(keys)]

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        """Write ``values`` to the backing map, then cache them."""
        keys = as_keys(keys)
        self.backing.multi_put(keys, values)
        for key, value in zip(keys, values):
            self._remember(key, value, _UNKNOWN)

    def _remember(self, key: Key, value: Any, token: Any) -> None:
        self._cache[key] = (value, token)
        self._cache.move_to_end(key)
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)

    def close(self) -> None:
        """Drop the cache and close the backing map."""
        self._cache.clear()
        self.backing.close()


class ConditionalCachedMap(CachedMap):
    """A CachedMap over a ConditionalBackingMap, offering its compare-and-set (see the module docstring)."""

    backing: ConditionalBackingMap

    def _read(self, keys: Sequence[Key]) -> list[Versioned]:
        return self.backing.multi_get_versioned(keys)

    def multi_get_versioned(self, keys: Sequence[Key]) -> list[Versioned]:
        """The values of ``keys`` with their tokens: from the cache where it knows the token, the others in one
        bulk versioned read (then cached). Called by the map states before a conditional write."""
        return self._lookup(keys, need_token=True)

    def multi_put_if(self, keys: Sequence[Key], values: Sequence[Any], tokens: Sequence[Any]) -> list[bool]:
        """Write each key whose stored token is still ``tokens[i]`` (the backing map's compare-and-set). A written
        key is cached with its new value (its new token unknown: the next versioned read goes to the store); a key
        another writer changed is dropped from the cache, so that reading it again reads the store."""
        keys = as_keys(keys)
        written = self.backing.multi_put_if(keys, values, tokens)
        for key, value, ok in zip(keys, values, written):
            if ok:
                self._remember(key, value, _UNKNOWN)
            else:
                self._cache.pop(key, None)
        return written
