"""An HTTP endpoint serving the Prometheus metrics of spouts and pipelines."""

from __future__ import annotations

import logging
from typing import Any

from kinesis_spout.errors import ConfigError
from kinesis_spout.metrics.collector import SpoutCollector, require_prometheus_client

__all__ = ["MetricsServer", "serve_collectors", "start_metrics_server"]

log = logging.getLogger(__name__)


#: The address to open for a server bound to a wildcard address (every interface).
_LOCAL_FOR_WILDCARD = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}


def endpoint_url(addr: str, port: int) -> str:
    """The URL of the metrics page of a server bound to ``addr:port``: a wildcard address (every interface) is
    given as this machine's loopback address, which answers; an IPv6 address is bracketed."""
    host = _LOCAL_FOR_WILDCARD.get(addr, addr)
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/metrics"


class MetricsServer:
    """A running metrics endpoint (``http://ADDR:PORT/metrics``) with its own registry. ``port`` is the port bound
    (useful with port 0); ``url`` the page's address (the loopback address for a server on every interface);
    ``registry`` holds one :class:`SpoutCollector` per source; ``close()`` stops the server and is idempotent."""

    def __init__(self, httpd: Any, thread: Any, registry: Any, addr: str = "0.0.0.0") -> None:
        self._httpd = httpd
        self._thread = thread
        self.registry = registry
        self.addr = addr
        self.port: int = int(httpd.server_address[1])
        self.url = endpoint_url(addr, self.port)

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
    see :attr:`MetricsServer.port`. Logs the page's URL (:attr:`MetricsServer.url`) at INFO. Needs the ``metrics``
    extra (prometheus-client)."""
    require_prometheus_client()
    collectors = [SpoutCollector(source) for source in sources]  # type errors before the port is bound
    return serve_collectors(port, collectors, addr=addr)


def serve_collectors(port: int, collectors: list[Any], addr: str = "0.0.0.0") -> MetricsServer:
    """Serve Prometheus ``collectors`` (objects with ``collect()``) as :func:`start_metrics_server` does. Who calls:
    :func:`start_metrics_server`, and ``KinesisLagListener.serve_metrics`` for a query's lag."""
    prometheus_client = require_prometheus_client()
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"metrics port must be a whole number from 0 to 65535, got {port!r}")
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    try:
        httpd, thread = prometheus_client.start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {addr}:{port}: {exc}; choose another metrics port") from exc
    for collector in collectors:
        registry.register(collector)
    server = MetricsServer(httpd, thread, registry, addr)
    listening = " (listening on every interface)" if addr in _LOCAL_FOR_WILDCARD else ""
    log.info("Prometheus metrics at %s%s", server.url, listening)
    return server
