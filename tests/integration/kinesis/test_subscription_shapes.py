"""A subscription read from a server that answers SubscribeToShard as real Kinesis does (an initial response first,
then events, the last naming the closed shard's children), and the refusals real Kinesis gives: the getter hands
out every record, ends the shard at its ChildShards, and names the fix of each refusal.

kinesis-local sends neither the initial response nor ChildShards, so these shapes are served here by a small HTTP
server replaying recorded byte shapes; frames are built by the encoder the event-stream unit tests use."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.fanout import FanOutGetter
from kinesis_spout.positions import TRIM_HORIZON
from kinesis_spout.testing.process import wait_until
from tests.unit.kinesis.eventstream_frames import INITIAL, event

SHARD = "shardId-000000000000"
ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/orders/consumer/billing:1"
SEQS = [str(49680571496625077500013097732006182401233942320789848066 + i * 1000) for i in range(5)]
CHILDREN = [{"ShardId": "shardId-000000000001", "ParentShards": [SHARD],
             "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "170141183460469231731687303715884105727"}}]


def records(seqs: list[str]) -> list[dict[str, Any]]:
    return [{"SequenceNumber": s, "Data": base64.b64encode(f"v{s[-4:]}".encode()).decode(), "PartitionKey": "k",
             "ApproximateArrivalTimestamp": 1795663618.5} for s in seqs]


#: A real Kinesis subscription to a shard closed after five records: initial response, two events, the last event.
REAL_SHAPE = [INITIAL,
              event({"Records": records(SEQS[:3]), "ContinuationSequenceNumber": SEQS[2], "MillisBehindLatest": 900}),
              event({"Records": records(SEQS[3:]), "ContinuationSequenceNumber": SEQS[4], "MillisBehindLatest": 0}),
              event({"Records": [], "MillisBehindLatest": 0, "ChildShards": CHILDREN})]


class Replay(BaseHTTPRequestHandler):
    """Answers each POST with the server's ``reply``: ``(status, content type, frames)``, frames chunked."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status, kind, frames = self.server.reply  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", kind)
        if status != 200 or kind != "application/vnd.amazon.eventstream":
            body = b"".join(frames)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for frame in frames:
            self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Replay)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def getter(server: ThreadingHTTPServer) -> FanOutGetter:
    url = f"http://127.0.0.1:{server.server_address[1]}"
    return FanOutGetter(make_client("us-east-1", url), "orders", SHARD, TRIM_HORIZON, ARN, end_probe_s=None)


def test_a_real_kinesis_stream_is_read_to_the_shard_end_its_children_announce(
        server: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    server.reply = (200, "application/vnd.amazon.eventstream", REAL_SHAPE)  # type: ignore[attr-defined]
    g = getter(server)
    got: list[str] = []
    behind: list[int | None] = []

    def step() -> bool:
        result = g.fetch()
        got.extend(r.sequence_number for r in result.records)
        behind.append(result.millis_behind_latest)
        return result.shard_end

    assert wait_until(step, 10.0, interval_s=0.01)
    assert got == SEQS and g.shard_end
    assert 900 in behind and g.subscriptions == 1 and g.initial_responses == 1
    assert g.fetch().shard_end  # and it stays ended, without subscribing again
    assert g.subscriptions == 1
    g.close()


@pytest.mark.parametrize(("status", "code", "match", "retriable"), [
    (403, "AccessDeniedException", "kinesis:SubscribeToShard.*retrieval='polling'", False),
    (400, "ResourceInUseException", "another subscription of this consumer still reads the shard", True),
    (400, "LimitExceededException", "throttled", True),
    (400, "ResourceNotFoundException", "consumer or the shard does not exist.*open the spout again", False),
])
def test_refusals_name_the_problem_and_the_fix(server: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch,
                                               status: int, code: str, match: str, retriable: bool) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    body = json.dumps({"__type": code, "message": "refused"}).encode()
    server.reply = (status, "application/x-amz-json-1.1", [body])  # type: ignore[attr-defined]
    with pytest.raises(KinesisError, match=match) as info:
        getter(server).fetch()
    assert info.value.retriable is retriable


def test_an_endpoint_answering_without_an_event_stream_has_no_fan_out(server: ThreadingHTTPServer,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    server.reply = (200, "application/json", [b"{}"])  # type: ignore[attr-defined]
    with pytest.raises(KinesisError, match="does not support enhanced fan-out") as info:
        getter(server).fetch()
    assert not info.value.retriable
