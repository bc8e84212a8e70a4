"""The Spark operations on state: ``persistent_aggregate``, ``partition_persist`` and ``state_query``.

Work happens where Spark does it. ``persistent_aggregate`` groups the batch by the key columns and aggregates in
Spark (partially before the shuffle: a SQL aggregate for :class:`~kinesis_spout.state.Count` and
:class:`~kinesis_spout.state.Sum`, ``reduceByKey`` for other combiners), so each key of the batch is in exactly
one partition; then each partition, on an executor, makes its map state from the picklable factory and does one
bulk read and one bulk write (one ``multi_get`` and one ``multi_put``: with compare-and-set, keys changed by
another writer in between are read and written again). The call returns when every partition has written: the
next batch's update cannot start before this one's is done, which is Trident's ordering of state updates by txid.

Each call tells the map states who writes (see :mod:`kinesis_spout.state.maps`): the batch's **run** and the
**write** (a new id per call, and the partition number). The run of a ``foreachBatch`` batch_id is the streaming
query's id (``query:<id>``, from the Spark job property ``sql.streaming.queryId``, kept across restarts from the
checkpoint location); of a SpoutPipeline batch, its ``run_id``; of a :class:`~kinesis_spout.state.base.TxBatch`,
its ``run``. A batch with no run (a bare int outside a streaming query, a TxBatch without ``run``) over a
transactional or opaque map of this package is refused (:class:`~kinesis_spout.state.base.StateNoRunError`): its
txids could not be told from another run's. A key written by another run's batch is refused
(:class:`~kinesis_spout.state.base.StateRunError`); the namespace's run is checked on the driver first (one read,
see :meth:`~kinesis_spout.state.maps.MapFactory.claim_run`), so a refused batch writes nothing.

**One call per namespace and batch.** The maps cannot tell a second call of a batch on a namespace from a replay
of the first, so the driver refuses it (:class:`~kinesis_spout.state.base.StateSecondWriteError`) before its Spark
job: it remembers, per namespace and run, the last batch attempt whose call completed (a SpoutPipeline batch
object; for a ``foreachBatch`` batch_id, the query's ``spark.jobGroup.id``, new at each start). A replay is a new
attempt and goes through. Not known, and not refused: TxBatch calls, NonTransactionalMaps, others' states.

The ``batch`` argument gives the txid and the spout kind (see :func:`~kinesis_spout.state.base.tx_batch`); a pair
that cannot be exactly-once raises :class:`~kinesis_spout.state.base.StatePairError` before anything is read or
written. pyspark and pyarrow are imported when an operation is called.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Protocol, Sequence, TypeGuard

from kinesis_spout.errors import ConfigError
from kinesis_spout.state.aggregators import CombineInto, ReduceInto
from kinesis_spout.state.base import (
    Key,
    MapKind,
    MapState,
    SpoutKind,
    StateFactory,
    StateNoRunError,
    StateSecondWriteError,
    TxBatch,
    check_pair,
    tx_batch,
)

if TYPE_CHECKING:
    from kinesis_spout.state.maps import MapFactory

__all__ = ["PersistResult", "StateUpdater", "partition_persist", "persistent_aggregate", "state_query"]

_VALUE = "__kinesis_spout_value"
#: The Spark job property a streaming query sets on the thread that runs its batches (and foreachBatch).
QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass(frozen=True)
class PersistResult:
    """What a state write did: the txid and spout kind, the partitions that wrote, the keys written (or skipped
    as already applied), the round trips to the store the partitions made (0 for stores that do not count) and
    the run the txid belongs to (None: none known)."""

    txid: int
    kind: SpoutKind
    partitions: int
    keys: int
    round_trips: int
    run: str | None = None


class StateUpdater(Protocol):
    """Trident's StateUpdater for ``partition_persist``: updates the state with one partition's rows."""

    def update_state(self, state: MapState, rows: list[Any]) -> None: ...


def _columns(df: Any, names: Sequence[str], what: str) -> list[str]:
    if isinstance(names, str) or not names:
        raise ConfigError(f"{what} must be a non-empty list of column names, got {names!r}")
    missing = [n for n in names if n not in df.columns]
    if missing:
        raise ConfigError(f"{what} names columns the DataFrame does not have: {missing} (columns: {df.columns})")
    return list(names)


def _classic(df: Any, operation: str) -> None:
    """Refuse a Spark Connect DataFrame (``pyspark.sql.connect``): the operations write state from tasks through
    ``df.rdd``, and Spark Connect has no RDDs. Called first by each operation, on the driver."""
    if type(df).__module__.startswith("pyspark.sql.connect."):
        raise ConfigError(f"{operation} needs a classic Spark session: it writes each partition's state from its task "
                          f"through DataFrame.rdd, and Spark Connect has no RDDs. Run it where the session is made "
                          f"with SparkSession.builder.master(...) (or spark-submit), not builder.remote(...)")


def _partitions(df: Any, partitions: int | None) -> int:
    if partitions is None:
        return max(1, int(df.sparkSession.sparkContext.defaultParallelism))
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ConfigError(f"partitions must be a whole number >= 1 or None, got {partitions!r}")
    return partitions


def _batch(df: Any, batch: Any, state: Any) -> TxBatch:
    """The batch's txid, kind and run, checked against ``state`` on the driver before anything is read or written:
    a pair that cannot be exactly-once raises StatePairError; a batch with no run over a transactional or opaque
    map of this package raises StateNoRunError. For a ``foreachBatch`` batch_id, the run is the query's id."""
    tx = tx_batch(batch)
    if tx.run is None and isinstance(batch, int) and not isinstance(batch, bool):
        query = _query_id(df)
        if query:
            tx = TxBatch(tx.txid, tx.kind, f"query:{query}")
    check_pair(state.kind, tx.kind)
    if tx.run is None and _stores_txids(state):
        bare = isinstance(batch, int) and not isinstance(batch, bool)
        what = "a bare batch id outside a streaming query" if bare else f"a {type(batch).__name__} without a run"
        raise StateNoRunError(
            f"batch {tx.txid} is {what}: a {state.kind.value} map takes a stored txid equal to the batch's for a "
            f"replay of that batch, so a second run of the same loop (its ids starting again) would be skipped or "
            f"recomputed as replays and counted wrong without a word. Refused before anything is read or written. "
            f"Name the run: pass TxBatch({tx.txid}, SpoutKind.{tx.kind.name}, run=\"<name of this run>\") as the "
            f"batch (from kinesis_spout.state). Keep the name to replay a txid after a crash and to go on counting "
            f"in the namespace (with txids after its last one); a namespace belongs to the first run that writes "
            f"it, so a run with a new name needs a new namespace. foreachBatch of a readStream query and "
            f"SpoutPipeline(exactly_once=...) batches give their run themselves")
    return tx


def _query_id(df: Any) -> str | None:
    """The id of the streaming query whose ``foreachBatch`` is running on this thread (None outside one)."""
    try:
        context = df.sparkSession.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect sessions have no SparkContext (and raise their own errors)
        return None
    query = context.getLocalProperty(QUERY_ID_PROPERTY)
    return str(query) if query else None


#: The Spark job property a streaming query sets to its run id (new at each start of the query): one run of a
#: query processes each batch once, so it tells a batch's attempts apart.
SPARK_RUN_PROPERTY = "spark.jobGroup.id"

_WRITES_LOCK = threading.Lock()
#: (namespace, run) -> (txid, attempt) of the last completed operation call on the namespace in this driver process:
#: guarded by _WRITES_LOCK; one entry per namespace and run (a later txid replaces it).
_last_writes: dict[tuple[str, str | None], tuple[int, Any]] = {}


def _attempt(df: Any, batch: Any) -> Any:
    """What identifies this attempt of the batch (None: not known, nothing is refused). A pipeline batch object
    is made anew for each attempt (a weak reference to it); a ``foreachBatch`` batch_id's attempt is the streaming
    query's run (``spark.jobGroup.id``, new at each start of the query). A TxBatch is a value, made again at will:
    no attempt."""
    if isinstance(batch, TxBatch):
        return None
    if isinstance(batch, int):
        if _query_id(df) is None:
            return None
        run = df.sparkSession.sparkContext.getLocalProperty(SPARK_RUN_PROPERTY)
        return f"spark-run:{run}" if run else None
    try:
        return weakref.ref(batch)
    except TypeError:
        return None


def _same_attempt(a: Any, b: Any) -> bool:
    if isinstance(a, weakref.ref) and isinstance(b, weakref.ref):
        return a() is not None and a() is b()
    return a is not None and a == b


def _stores_txids(state: Any) -> TypeGuard["MapFactory"]:
    """Whether ``state`` is a map factory of this package whose maps store txids (transactional or opaque)."""
    from kinesis_spout.state.maps import MapFactory

    return isinstance(state, MapFactory) and state.kind is not MapKind.NON_TRANSACTIONAL


def _tracked_namespace(state: Any, attempt: Any) -> str | None:
    """The namespace whose calls of a batch attempt are tracked (what a map factory storing txids writes); None for
    other states (no txid stored: a second call of a batch is no replay to confuse) or an unknown attempt."""
    return repr(state.backing) if attempt is not None and _stores_txids(state) else None


def _check_second_write(state: Any, tx: TxBatch, attempt: Any) -> None:
    """Refuse a second operation call of this batch attempt on the namespace (StateSecondWriteError). Called on the
    driver before the call's Spark job; reads _last_writes under its lock."""
    namespace = _tracked_namespace(state, attempt)
    if namespace is None:
        return
    with _WRITES_LOCK:
        last = _last_writes.get((namespace, tx.run))
    if last is None or last[0] != tx.txid or not _same_attempt(last[1], attempt):
        return
    where = getattr(state.backing, "namespace", getattr(state.backing, "name", "?"))
    raise StateSecondWriteError(
        f"batch {tx.txid} already wrote state namespace {where!r} in an earlier operation call of this batch: a "
        f"second call on the same namespace would be taken for a replay of the first (its keys skipped or "
        f"recomputed from before the batch), so it is refused and writes nothing. Make one call per namespace and "
        f"batch (e.g. union the DataFrames, or update the keys in one StateUpdater), or give the second call its "
        f"own namespace")


def _wrote(state: Any, tx: TxBatch, attempt: Any) -> None:
    """Remember that this batch attempt's call on the namespace completed (driver, after the call's Spark job)."""
    namespace = _tracked_namespace(state, attempt)
    if namespace is None:
        return
    with _WRITES_LOCK:
        _last_writes[(namespace, tx.run)] = (tx.txid, attempt)


def _round_trips(state: Any) -> int:
    backing = getattr(state, "backing", None)
    while backing is not None and not hasattr(backing, "round_trips") and hasattr(backing, "backing"):
        backing = backing.backing
    return int(getattr(backing, "round_trips", 0) or 0)


def _write_partitions(rdd: Any, state: StateFactory, tx: TxBatch, num: int, apply: Any, attempt: Any = None
                      ) -> tuple[int, int, int]:
    """Run ``apply(map_state, items)`` on each non-empty partition of ``rdd`` under the batch's txid, then commit
    (the map state's write); (partitions, keys, trips). The map states of this package are told the run and the
    write (a new id for this call, and the partition number); other states get ``begin_commit(txid)``. A second
    call of the batch ``attempt`` on one namespace is refused first (StateSecondWriteError)."""
    from kinesis_spout.state.maps import BatchedMap, SnapshottableMap, new_call_id

    _check_second_write(state, tx, attempt)
    txid, run_id, call = tx.txid, tx.run, new_call_id()
    if run_id is not None and _stores_txids(state):
        state.claim_run(run_id)

    def run(index: int, items: Iterator[Any]) -> Iterator[tuple[int, int]]:
        taken = list(items)
        if not taken:
            return
        st = state.make_state(index, num)
        try:
            if isinstance(st, (BatchedMap, SnapshottableMap)):
                st.begin_commit(txid, run=run_id, writer=(call, index))
            else:
                st.begin_commit(txid)
            keys = apply(st, taken)
            st.commit(txid)
            yield keys, _round_trips(st)
        finally:
            close = getattr(st, "close", None)
            if close is not None:
                close()

    stats = rdd.mapPartitionsWithIndex(run).collect()
    _wrote(state, tx, attempt)
    return len(stats), sum(k for k, _ in stats), sum(t for _, t in stats)


def persistent_aggregate(df: Any, batch: Any, state: StateFactory, *, group_by: Sequence[str], aggregator: Any,
                         partitions: int | None = None) -> PersistResult:
    """Aggregate ``df`` by ``group_by`` with ``aggregator`` and fold the result into ``state`` for this batch.

    ``batch`` is ``foreachBatch``'s batch_id or the SpoutPipeline batch; ``state`` a map factory such as
    ``OpaqueMap.factory(RedisBackingMap.factory(url, namespace="wordcount"))``; ``aggregator`` a combiner
    (``Count()``, ``Sum("col")``, or init/combine/zero of your own) or a reducer (init/reduce). ``partitions``
    (default: Spark's default parallelism) is how many tasks write, each with one bulk read and one bulk write.
    Blocks until every partition wrote; returns a :class:`PersistResult`. A Spark Connect DataFrame is refused.
    """
    _classic(df, "persistent_aggregate")
    tx = _batch(df, batch, state)
    keys = _columns(df, group_by, "group_by")
    num = _partitions(df, partitions)
    agg = aggregator
    if all(callable(getattr(agg, m, None)) for m in ("init", "combine", "zero")):
        if callable(getattr(agg, "spark_agg", None)):
            grouped = df.groupBy(*keys).agg(agg.spark_agg().alias(_VALUE)).coalesce(num)
            pairs = grouped.rdd.map(lambda r: (tuple(r[c] for c in keys), r[_VALUE]))
        else:
            pairs = df.rdd.map(lambda r: (tuple(r[c] for c in keys), agg.init(r))).reduceByKey(agg.combine, num)

        def apply(st: MapState, items: list[tuple[Key, Any]]) -> int:
            st.multi_update([k for k, _ in items], [CombineInto(agg, v) for _, v in items])
            return len(items)
    elif all(callable(getattr(agg, m, None)) for m in ("init", "reduce")):
        pairs = df.rdd.map(lambda r: (tuple(r[c] for c in keys), r)).groupByKey(num)

        def apply(st: MapState, items: list[tuple[Key, Any]]) -> int:
            st.multi_update([k for k, _ in items], [ReduceInto(agg, rows) for _, rows in items])
            return len(items)
    else:
        raise ConfigError(f"aggregator must be a combiner (init(row), combine(a, b), zero()) or a reducer (init(), "
                          f"reduce(value, row)), got {aggregator!r}")
    parts, written, trips = _write_partitions(pairs, state, tx, num, apply, _attempt(df, batch))
    return PersistResult(tx.txid, tx.kind, parts, written, trips, tx.run)


def _check_shared_keys(state: StateFactory, partition_by: Sequence[str] | None) -> None:
    """Refuse, on the driver, partition_persist without ``partition_by`` over a map of this package whose backing
    map has no compare-and-set: two partitions' tasks updating one key would each read it and overwrite the
    other's updates at commit."""
    from kinesis_spout.state.maps import MapFactory

    if partition_by is not None or not isinstance(state, MapFactory) or state.compare_and_set():
        return
    raise ConfigError(
        f"partition_persist without partition_by over {type(state.backing).__name__}, whose backing maps have no "
        f"compare-and-set: the rows of one key may sit in several partitions, whose tasks would each read the key "
        f"and overwrite each other's updates when they write. Give partition_by=[the key columns] (each key's rows "
        f"in one partition, with an updater that updates only keys of those columns), or use a backing map with "
        f"compare-and-set (multi_get_versioned and multi_put_if, as the memory, Redis and memcached backing maps "
        f"have). Nothing of the batch was written")


def partition_persist(df: Any, batch: Any, state: StateFactory, updater: StateUpdater, *,
                      partition_by: Sequence[str] | None = None, partitions: int | None = None) -> PersistResult:
    """Hand each partition's rows to ``updater.update_state(map_state, rows)`` under this batch's txid.

    The updater may update a key several times (e.g. row by row): every update counts, and the partition's
    updates are written when it is done. Rows of one key may sit in several partitions with an OpaqueMap (each
    partition's updates are added, and a replay recomputes the key) or a NonTransactionalMap. A TransactionalMap
    needs each key's updates in one partition: ``partition_by`` (the key columns; the rows are repartitioned by
    them) is required with it, and a key updated by two partitions anyway (an updater writing keys of other
    columns) is refused with :class:`~kinesis_spout.state.base.StatePartitionError`. Without ``partition_by``, the
    package's maps need a backing map with compare-and-set (two partitions' tasks update a key concurrently):
    over one without it, the call is refused with ConfigError before anything is written. ``PersistResult.keys``
    counts rows here. A Spark Connect DataFrame is refused.
    """
    _classic(df, "partition_persist")
    tx = _batch(df, batch, state)
    if not callable(getattr(updater, "update_state", None)):
        raise ConfigError(f"updater must have update_state(state, rows), got {updater!r}")
    if partition_by is None and state.kind is MapKind.TRANSACTIONAL:
        raise ConfigError("partition_persist with a TransactionalMap needs partition_by=[the key columns], so that "
                          "each key's rows are in one partition (a replay could not tell which partitions' updates "
                          "a key holds); or use an OpaqueMap, which sums the partitions' updates of a key")
    _check_shared_keys(state, partition_by)
    num = _partitions(df, partitions)
    frame = df.repartition(num, *_columns(df, partition_by, "partition_by")) if partition_by is not None \
        else df.coalesce(num)

    def apply(st: MapState, rows: list[Any]) -> int:
        updater.update_state(st, rows)
        return len(rows)

    parts, written, trips = _write_partitions(frame.rdd, state, tx, num, apply, _attempt(df, batch))
    return PersistResult(tx.txid, tx.kind, parts, written, trips, tx.run)


def state_query(df: Any, state: StateFactory, *, key_columns: Sequence[str], result_column: str = "value",
                result_type: str = "long", batch: Any = None) -> Any:
    """``df`` with the state's value of each row's key in ``result_column`` (null where none).

    Trident's stateQuery with batch_retrieve: each partition reads all its distinct keys in one bulk read on its
    executor, and the values are joined back to the rows. ``result_type`` is the Spark SQL type of the values
    (``"long"``, ``"double"``, ``"string"``...). Without ``batch``, the latest values. With ``batch`` (the batch
    being processed, as given to persistent_aggregate), the reads are those of a state in that batch, as in
    Trident: an OpaqueMap gives the value before the batch (never a replayed batch's earlier, partial attempt) and
    refuses a key written by a later batch (StateOrderError) or another run (StateRunError); a TransactionalMap
    gives the stored value. Lazy, like any DataFrame: each action reads again. A Spark Connect DataFrame is refused.
    """
    _classic(df, "state_query")
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    from kinesis_spout.state.maps import BatchedMap, SnapshottableMap

    tx = _batch(df, batch, state) if batch is not None else None
    keys = _columns(df, key_columns, "key_columns")
    if result_column in df.columns:
        raise ConfigError(f"result_column {result_column!r} is already a column of the DataFrame; pick another name")
    try:
        spark_type = _parse_datatype_string(result_type)
    except Exception as exc:  # noqa: BLE001 - Spark's parse errors have no common base class
        raise ConfigError(f"result_type must be a Spark SQL type such as 'long', 'double' or 'string', got "
                          f"{result_type!r}: {exc}") from exc
    schema = StructType(list(df.schema.fields) + [StructField(result_column, spark_type, True)])

    def query(index: int, rows: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
        taken = list(rows)
        if not taken:
            return
        wanted = list({tuple(r[c] for c in keys) for r in taken})
        st = state.make_state(index, 1)
        try:
            if tx is not None and isinstance(st, (BatchedMap, SnapshottableMap)):
                st.begin_commit(tx.txid, run=tx.run)
            elif tx is not None and callable(getattr(st, "begin_commit", None)):
                st.begin_commit(tx.txid)
            found = dict(zip(wanted, st.multi_get(wanted)))
        finally:
            close = getattr(st, "close", None)
            if close is not None:
                close()
        for r in taken:
            yield (*r, found[tuple(r[c] for c in keys)])

    return df.sparkSession.createDataFrame(df.rdd.mapPartitionsWithIndex(query), schema)
