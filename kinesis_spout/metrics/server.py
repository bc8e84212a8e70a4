"""An HTTP endpoint serving the Prometheus metrics of spouts and pipelines."""

from __future__ import annotations

import logging
from typing import Any

from kinesis_spout.errors import ConfigError
from kinesis_spout.metrics.collector import SpoutCollector, require_prometheus_client

__all__ = ["MetricsServer", "start_metrics_server"]

log = logging.getLogger("kinesis_spout.metrics")


class MetricsServer:
    """A running metrics endpoint (``http://ADDR:PORT/metrics``) with its own registry. ``port`` is the port bound
    (useful with port 0); ``registry`` holds one :class:`SpoutCollector` per source; ``close()`` stops the server
    and is idempotent."""

    def __init__(self, httpd: Any, thread: Any, registry: Any) -> None:
        self._httpd = httpd
        self._thread = thread
        self.registry = registry
        self.port: int = int(httpd.server_address[1])

    def add(self, source: Any) -> SpoutCollector:
        """Serve the metrics of one more spout or pipeline too."""
        collector = SpoutCollector(source)
        self.registry.register(collector)
        return collector

    def close(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(10.0)


def start_metrics_server(port: int, *sources: Any, addr: str = "0.0.0.0") -> MetricsServer:
    """Serve the metrics of ``sources`` (spouts or pipelines, read at each scrape) on ``addr:port`` from a daemon
    thread, in a registry of its own (the process-wide default registry is left alone). Port 0 takes a free port:
    see :attr:`MetricsServer.port`. Needs the ``metrics`` extra (prometheus-client)."""
    prometheus_client = require_prometheus_client()
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"metrics port must be a whole number from 0 to 65535, got {port!r}")
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    collectors = [SpoutCollector(source) for source in sources]  # type errors before the port is bound
    try:
        httpd, thread = prometheus_client.start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {addr}:{port}: {exc}; choose another metrics port") from exc
    for collector in collectors:
        registry.register(collector)
    server = MetricsServer(httpd, thread, registry)
    log.info("Prometheus metrics on http://%s:%d/metrics", addr, server.port)
    return server
