"""An endpoint that answers with an HTML error page (moto's Flask server on a crash inside moto, a proxy, a load
balancer) gives an error line with its status and title, not the whole page."""

from __future__ import annotations

import http.server
import threading
from typing import Iterator

import pytest

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.shards import list_shards

#: What moto's server (werkzeug) answers when moto raises inside a request.
WERKZEUG_500 = (b"<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n"
                b"<h1>Internal Server Error</h1>\n<p>The server encountered an internal error and was unable to "
                b"complete your request. Either the server is overloaded or there is an error in the "
                b"application.</p>\n")


class _HtmlErrors(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(500)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(WERKZEUG_500)))
        self.end_headers()
        self.wfile.write(WERKZEUG_500)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        pass


@pytest.fixture
def html_error_endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HtmlErrors)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_an_html_error_page_is_reduced_to_its_status_and_title(html_error_endpoint: str, monkeypatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    client = make_client("us-east-1", html_error_endpoint)
    with pytest.raises(KinesisError) as caught:
        list_shards(client, "sentences")
    message = str(caught.value)
    assert "500 Internal Server Error" in message, message
    assert "<" not in message and "\n" not in message and "overloaded" not in message, message
    assert caught.value.retriable  # a server error: the reader retries it
