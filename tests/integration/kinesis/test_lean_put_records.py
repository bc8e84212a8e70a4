"""The lean PutRecords path (the transport of the one PutRecords writer) sends what botocore sends and yields what
botocore yields, on moto and kinesalite: binary and empty data, unicode partition keys, explicit hash keys, entries
refused; botocore serialises a client's PutRecords once (to learn the request), not once per call; errors raise what
botocore raises; a reply with a field the lean parser does not know goes to botocore."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.writing.lean_put import (
    Fallback,
    LeanPutRecords,
    lean_of,
    parse_reply,
    put_records,
    request_body,
)
from kinesis_spout.kinesis.writing.putter import PutEntry, RecordPutter
from kinesis_spout.retry import RetryPolicy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

ENTRIES: list[tuple[bytes, str, str | None]] = [
    (bytes(range(256)), "ключ-1", None),
    (b"", "empty data", None),
    (b"routed", "any", str(2 ** 128 - 1000)),
    (b'quotes " and \\ backslashes', 'key "quoted" \\ \u2603', "0"),
]


def read_back(client: Any, stream: str) -> dict[tuple[str, str], tuple[bytes, str]]:
    """Every record of the stream by shard and sequence number (moto numbers each shard from 1): (data, partition
    key)."""
    out: dict[tuple[str, str], tuple[bytes, str]] = {}
    for shard in client.list_shards(StreamName=stream)["Shards"]:
        it = client.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                       ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        for r in client.get_records(ShardIterator=it, Limit=10_000)["Records"]:
            out[shard["ShardId"], r["SequenceNumber"]] = (r["Data"], r["PartitionKey"])
    return out


def test_the_request_body_is_what_botocore_sends(kinesis_backend: KinesisEndpoint) -> None:
    client = make_client(kinesis_backend.region, kinesis_backend.endpoint_url)
    sent: list[bytes] = []

    def note(request: Any, **_: Any) -> None:
        sent.append(request.body)

    client.meta.events.register("before-send.kinesis.PutRecords", note)
    records = [{"Data": d, "PartitionKey": pk, **({} if h is None else {"ExplicitHashKey": h})}
               for d, pk, h in ENTRIES]
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        client.put_records(StreamName="s", Records=records)  # botocore's own call (no such stream)
    assert json.loads(sent[-1]) == json.loads(request_body("s", ENTRIES))


def test_records_put_lean_are_stored_and_answered_as_through_botocore(kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=2)
    client = make_client(kinesis_backend.region, kinesis_backend.endpoint_url)
    reply = put_records(client, stream, ENTRIES)
    assert reply["FailedRecordCount"] == 0 and len(reply["Records"]) == len(ENTRIES)
    stored = read_back(client, stream)
    assert [stored[r["ShardId"], r["SequenceNumber"]] for r in reply["Records"]] == [(d, pk) for d, pk, _ in ENTRIES]
    assert all(r["ShardId"].startswith("shardId-") for r in reply["Records"])
    routed = {r["ShardId"] for r, (_, _, h) in zip(reply["Records"], ENTRIES) if h is not None}
    assert len(routed) == 2, "explicit hash keys 0 and 2**128-1000 route to the first and the last shard"


def test_botocore_serialises_a_clients_put_records_once_not_per_call(kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=1)
    client = make_client(kinesis_backend.region, kinesis_backend.endpoint_url)
    built: list[str] = []
    client.meta.events.register("before-parameter-build.kinesis.PutRecords", lambda **kw: built.append("x"))
    putter: RecordPutter[int] = RecordPutter(stream, client, RetryPolicy(initial_s=0.01, deadline_s=5.0))
    landed = putter.put([(i, PutEntry(b"%d" % i, f"k{i}")) for i in range(1200)])  # 3 calls
    assert [x.item for x in landed] == list(range(1200))
    assert putter.counters.snapshot()["calls"] == 3
    assert len(built) == 1, f"botocore built {len(built)} PutRecords requests for 3 calls"
    stored = read_back(client, stream)
    assert [stored[x.shard_id, x.sequence_number] for x in landed] == [(b"%d" % i, f"k{i}") for i in range(1200)]


def test_an_error_raises_what_botocore_raises(kinesis_backend: KinesisEndpoint) -> None:
    client = make_client(kinesis_backend.region, kinesis_backend.endpoint_url)
    stream = kinesis_backend.create_stream(shards=1)
    put_records(client, stream, ENTRIES[:1])
    client.delete_stream(StreamName=stream)
    assert wait_until(lambda: stream not in client.list_streams()["StreamNames"], 10), "the stream was not deleted"
    with pytest.raises(ClientError) as theirs:
        client.put_records(StreamName=stream, Records=[{"Data": b"x", "PartitionKey": "k"}])
    lean = lean_of(client)
    assert lean is not None, "make_client gives its clients the lean PutRecords"
    before = lean.fallbacks
    with pytest.raises(ClientError) as mine:
        put_records(client, stream, ENTRIES[:1])
    assert type(mine.value) is type(theirs.value)
    assert mine.value.response["Error"]["Code"] == theirs.value.response["Error"]["Code"] == \
        "ResourceNotFoundException"
    assert lean.fallbacks == before + 1


class Reply:
    """A reply as botocore's HTTP session returns it (what convert_to_response_dict reads)."""

    def __init__(self, body: dict[str, Any], status: int = 200) -> None:
        self.content = json.dumps(body).encode()
        self.status_code = status
        self.headers = {"x-amzn-RequestId": "r-1", "Content-Type": "application/x-amz-json-1.1"}


OK = {"SequenceNumber": "49590338271490256608559692538361571095921575989136588898", "ShardId": "shardId-000000000000"}
REFUSED = {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "Rate exceeded for shard"}


@pytest.mark.parametrize("body", [
    {"FailedRecordCount": 0, "Records": [OK, OK]},
    {"FailedRecordCount": 1, "Records": [OK, REFUSED], "EncryptionType": "KMS"},
    {"FailedRecordCount": 2, "Records": [REFUSED, {**REFUSED, "ErrorCode": "InternalFailure"}]},
])
def test_known_replies_parse_as_botocore_parses_the_same_bytes(body: dict[str, Any]) -> None:
    lean = LeanPutRecords(make_client("us-east-1", "http://127.0.0.1:9"))
    reply = Reply(body)
    theirs = lean.botocore_parse(reply)
    theirs.pop("ResponseMetadata")
    assert parse_reply(reply.content, 2) == theirs


@pytest.mark.parametrize(("body", "expected"), [
    ({"FailedRecordCount": 0, "Records": [{**OK, "NewField": 1}]}, 1),
    ({"FailedRecordCount": 0, "Records": [OK], "SomethingNew": True}, 1),
    ({"FailedRecordCount": 0, "Records": [OK]}, 2),  # fewer results than entries sent
    ({"FailedRecordCount": 0, "Records": [{**OK, "ShardId": None}]}, 1),
    ({"FailedRecordCount": 0}, 1),
])
def test_unknown_replies_are_left_to_botocore(body: dict[str, Any], expected: int) -> None:
    with pytest.raises(Fallback):
        parse_reply(json.dumps(body).encode(), expected)
