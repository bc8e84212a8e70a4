"""Helpers shared by the integration tests of several areas: KPL aggregates made by aws-kinesis-agg (a producer
nobody here wrote), the spout configuration the KPL tests read them with, and a TCP relay whose connections a test
cuts (a subscription's streamed reply included)."""

from __future__ import annotations

import socket
import threading
import urllib.parse
from typing import Any

from aws_kinesis_agg.aggregator import RecordAggregator

from kinesis_spout import InitialPosition, SpoutConfig
from kinesis_spout.testing.kinesis import KinesisEndpoint


def aggregate(users: list[tuple[str, bytes]]) -> tuple[str, bytes]:
    """(the aggregate's own partition key, its data), made by aws-kinesis-agg."""
    aggregator = RecordAggregator()
    for pk, data in users:
        assert aggregator.add_user_record(pk, data) is None
    pk, _, blob = aggregator.clear_and_get().get_contents()
    return pk, bytes(blob)


def make_config(endpoint: KinesisEndpoint, stream: str, **extra: Any) -> SpoutConfig:
    """A spout from TRIM_HORIZON of ``stream`` with app name "kpl", quick to poll an idle shard and checkpointing
    at every chance."""
    return SpoutConfig(stream_name=stream, app_name="kpl", endpoint_url=endpoint.endpoint_url,
                       region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON,
                       empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, **extra)


class TcpCutter:
    """A TCP relay in front of an endpoint whose live connections :meth:`cut` ends at once (a streamed reply
    included: an HTTP proxy that reads whole replies cannot cut a subscription)."""

    def __init__(self, upstream_url: str) -> None:
        parsed = urllib.parse.urlsplit(upstream_url)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint_url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []  # under lock
        self.closed = False

    def __enter__(self) -> TcpCutter:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self.closed = True
        self.listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> int:
        """End every connection open now; returns how many relays were cut."""
        with self.lock:
            live, self.sockets = self.sockets, []
        for s in live:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        return len(live) // 2
