"""CachedMap: an LRU cache of stored values in front of a backing map (Trident's CachedMap).

Reads are served from the cache where it has the key, the misses in one bulk read; writes go through to the
backing map and then into the cache. Safe only when this process is the one writer of its keys (Trident's
assumption: keys are partitioned to tasks); with several writers use the backing map alone, whose
compare-and-set the maps use. One thread at a time (the map state's). Pure logic.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Sequence

from kinesis_spout.state.base import BackingMap, Key

__all__ = ["CachedMap"]


class CachedMap:
    """A write-through LRU of at most ``size`` stored values over ``backing``. ``hits``/``misses`` count reads."""

    def __init__(self, backing: BackingMap, size: int = 1000) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a whole number >= 1, got {size!r}")
        self.backing = backing
        self.size = size
        self._cache: OrderedDict[Key, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        out: list[Any] = [None] * len(keys)
        missing: list[int] = []
        for i, key in enumerate(keys):
            if key in self._cache:
                self._cache.move_to_end(key)
                out[i] = self._cache[key]
            else:
                missing.append(i)
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            got = self.backing.multi_get([keys[i] for i in missing])
            for i, value in zip(missing, got):
                out[i] = value
                self._remember(keys[i], value)
        return out

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        self.backing.multi_put(keys, values)
        for key, value in zip(keys, values):
            self._remember(key, value)

    def _remember(self, key: Key, value: Any) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)

    def close(self) -> None:
        self._cache.clear()
        self.backing.close()
