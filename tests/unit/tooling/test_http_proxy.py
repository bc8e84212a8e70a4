"""The fault proxy's HTTP server: a client that goes away in the middle of a request (killed by a crash test)
is not printed as a traceback."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

from kinesis_spout.testing.http_proxy import ProxyServer
from kinesis_spout.testing.process import wait_until


def test_a_client_reset_mid_request_prints_no_traceback(capfd: Any) -> None:
    server = ProxyServer(("127.0.0.1", 0), on_request=lambda handler: None)
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    serving.start()
    try:
        client = socket.create_connection(server.server_address[:2])
        client.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npartial")
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
        client.close()
        assert wait_until(lambda: not [t for t in threading.enumerate() if t.name.startswith("fault-proxy-conn")],
                          5)
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err
