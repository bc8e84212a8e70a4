"""``KinesisLagListener``: the lag of every ``format("kinesis_spout")`` query of a session, to the log and Prometheus.

::

    from kinesis_spout.spark.source.lag_listener import KinesisLagListener

    lag = KinesisLagListener()               # one INFO line per progress of each kinesis_spout source
    spark.streams.addListener(lag)
    server = lag.serve_metrics(9109)         # or registry.register(lag.collector()); needs the metrics extra

Each ``StreamingQueryProgress`` carries the source's ``latestOffset`` (:mod:`kinesis_spout.spark.source.lag`): per shard
its last read's MillisBehindLatest, the arrival time of its last record read and the records read and not processed.
The listener keeps the last one of each query and source (``lags``), logs it (logger
``kinesis_spout.spark.source.lag_listener``) and serves it at scrape time as the gauges ``kinesis_spout_query_*``
(:data:`kinesis_spout.metrics.names.QUERY_METRICS`).
A query that terminates is forgotten. Spark calls the listener on its listener-bus thread; ``lags`` and scrapes are
read from any thread (one lock).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Iterator, Mapping

from pyspark.sql.streaming import StreamingQueryListener

from kinesis_spout.metrics.collector import require_prometheus_client
from kinesis_spout.metrics.names import QUERY_METRICS
from kinesis_spout.spark.source.lag import QueryLag, parse_latest_offset

__all__ = ["KinesisLagListener", "QueryLagCollector"]

log = logging.getLogger(__name__)


class KinesisLagListener(StreamingQueryListener):
    """A ``StreamingQueryListener`` that turns each kinesis_spout source's progress into its lag (see the module).

    ``log_level``: the level of the line logged per progress (None: no line). Other sources' progress is ignored.
    """

    def __init__(self, log_level: int | None = logging.INFO) -> None:
        self.log_level = log_level
        self._lock = threading.Lock()
        self._lags: dict[tuple[str, str], QueryLag] = {}  # (query, source description) -> its last lag

    @property
    def lags(self) -> dict[tuple[str, str], QueryLag]:
        """The last lag of each kinesis_spout source of each running query: ``(query, source)`` -> QueryLag, where
        ``query`` is the query's name, else its id, and ``source`` Spark's description of the source."""
        with self._lock:
            return dict(self._lags)

    def observe(self, progress: Mapping[str, Any]) -> list[QueryLag]:
        """Take one progress (``event.progress``, or ``query.lastProgress``): keep, log and return the lag of each
        kinesis_spout source in it. Who calls: :meth:`onQueryProgress`, or a user polling ``lastProgress``."""
        query = str(progress.get("name") or progress.get("id"))
        found = []
        for index, source in enumerate(progress.get("sources") or ()):
            lag = parse_latest_offset(source.get("latestOffset"))
            if lag is None:
                continue
            found.append(lag)
            with self._lock:
                self._lags[(query, str(source.get("description") or index))] = lag
            if self.log_level is not None:
                log.log(self.log_level, "query %s batch %s: %s", query, progress.get("batchId"), lag.describe())
        return found

    def onQueryStarted(self, event: Any) -> None:
        return None

    def onQueryProgress(self, event: Any) -> None:
        self.observe(event.progress)

    def onQueryIdle(self, event: Any) -> None:
        return None

    def onQueryTerminated(self, event: Any) -> None:
        """Forget the query's lags (its gauges leave the next scrape)."""
        gone = {str(event.id), str(getattr(event, "name", None) or event.id)}
        with self._lock:
            for key in [k for k in self._lags if k[0] in gone]:
                del self._lags[key]

    def collector(self) -> QueryLagCollector:
        """A Prometheus collector of this listener's lags, for a registry of your own."""
        return QueryLagCollector(self)

    def serve_metrics(self, port: int, addr: str = "0.0.0.0") -> Any:
        """Serve the lags on ``http://ADDR:PORT/metrics`` from a daemon thread, in a registry of its own; returns
        the server (``port``, ``url``, ``close()``). Port 0 takes a free port. Needs the ``metrics`` extra."""
        from kinesis_spout.metrics.server import serve_collectors

        return serve_collectors(port, [self.collector()], addr=addr)


class QueryLagCollector:
    """Reads a :class:`KinesisLagListener`'s lags at scrape time as the gauges of ``QUERY_METRICS``: per shard
    (labels ``stream``, ``app``, ``query``, ``shard``) and per source (``stream``, ``app``, ``query``)."""

    def __init__(self, listener: KinesisLagListener) -> None:
        self.listener = listener

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        core = require_prometheus_client().core
        lags = self.listener.lags
        for spec in QUERY_METRICS:
            family = core.GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
            for (query, _), lag in sorted(lags.items()):
                base = [lag.stream, lag.app, query]
                if "shard" not in spec.labels:
                    total = lag.millis_behind_latest
                    if total is not None:
                        family.add_metric(base, total / 1000.0)
                    continue
                for shard in lag.shards:
                    value = _shard_value(spec.source, shard)
                    if value is not None:
                        family.add_metric(base + [shard.shard_id], value)
            yield family


def _shard_value(source: str, shard: Any) -> float | None:
    if source == "millis_behind_latest":
        return None if shard.millis_behind_latest is None else shard.millis_behind_latest / 1000.0
    if source == "last_arrival":
        return None if shard.last_arrival is None else shard.last_arrival.timestamp()
    value = getattr(shard, source)
    return None if value is None else float(value)
