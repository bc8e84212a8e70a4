"""Exactly-once state on Spark: Trident's transactional and opaque state.

::

    from kinesis_spout.state import OpaqueMap, Count, persistent_aggregate
    from kinesis_spout.state.redis import RedisBackingMap

    counts = OpaqueMap.factory(RedisBackingMap.factory("redis://127.0.0.1:6379/0", namespace="wordcount"))
    persistent_aggregate(words, batch, counts, group_by=["word"], aggregator=Count())

The core (maps, values, serializer, aggregators, the in-memory backing map) is pure Python; the Spark operations
import pyspark when called; the Redis and memcached backends live in ``kinesis_spout.state.redis`` and
``kinesis_spout.state.memcached`` (extra ``state``).
"""

from __future__ import annotations

from kinesis_spout.state.aggregators import CombinerAggregator, Count, ReducerAggregator, Sum
from kinesis_spout.state.base import (
    BackingMap,
    BackingMapFactory,
    ConditionalBackingMap,
    MapKind,
    MapState,
    Snapshottable,
    SpoutKind,
    State,
    StateDecodeError,
    StateError,
    StateFactory,
    StateNoRunError,
    StateOrderError,
    StatePairError,
    StatePartitionError,
    StateRunError,
    StateSecondWriteError,
    TxBatch,
    Versioned,
    check_pair,
    tx_batch,
)
from kinesis_spout.state.cached import CachedMap
from kinesis_spout.state.maps import MapFactory, NonTransactionalMap, OpaqueMap, SnapshottableMap, TransactionalMap
from kinesis_spout.state.memory import MemoryBackingMap
from kinesis_spout.state.operations import (
    PersistResult,
    StateUpdater,
    partition_persist,
    persistent_aggregate,
    state_query,
)
from kinesis_spout.state.serializer import JsonSerializer, Serializer
from kinesis_spout.state.values import OpaqueValue, TransactionalValue

__all__ = [
    "BackingMap", "BackingMapFactory", "CachedMap", "CombinerAggregator", "ConditionalBackingMap", "Count",
    "JsonSerializer", "MapFactory", "MapKind", "MapState", "MemoryBackingMap", "NonTransactionalMap", "OpaqueMap",
    "OpaqueValue", "PersistResult", "ReducerAggregator", "Serializer", "Snapshottable", "SnapshottableMap",
    "SpoutKind", "State", "StateDecodeError", "StateError", "StateFactory", "StateNoRunError", "StateOrderError",
    "StatePairError", "StatePartitionError", "StateRunError", "StateSecondWriteError", "StateUpdater", "Sum",
    "TransactionalMap", "TransactionalValue", "TxBatch", "Versioned", "check_pair", "partition_persist",
    "persistent_aggregate", "state_query", "tx_batch",
]
