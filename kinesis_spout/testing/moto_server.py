"""moto's Kinesis in server mode, in this process, on a free loopback port."""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any
from urllib.request import Request, urlopen

from kinesis_spout.errors import ServerStartError


class MotoKinesisServer:
    """moto's threaded server. Quirks to know: sequence numbers are "1", "2", ... per shard; closed shards never
    end; iterators never expire; no throttling. Constructor does no I/O; ``close()`` is idempotent.
    """

    def __init__(self) -> None:
        self._server: Any = None  # moto.server.ThreadedMotoServer once started
        self._port: int | None = None

    @property
    def endpoint_url(self) -> str:
        if self._port is None:
            raise ServerStartError("moto server not started yet")
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> "MotoKinesisServer":
        if self._server is not None:
            return self
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ServerStartError("moto's server is not installed: pip install 'moto[server]'") from exc
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        self._port = int(server.get_host_and_port()[1])
        self._server = server
        return self

    def reset(self) -> None:
        """Forget every stream (moto's reset API)."""
        with urlopen(Request(f"{self.endpoint_url}/moto-api/reset", method="POST"), timeout=10):
            pass

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    def __enter__(self) -> "MotoKinesisServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
