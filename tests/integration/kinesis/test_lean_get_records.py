"""The lean GetRecords path yields exactly what botocore yields on the same reply bytes, on moto and kinesalite:
binary data, unicode partition keys, KPL aggregates, a closed shard's last replies (ChildShards), empty replies;
errors raise what botocore raises; a reply with a field the lean parser does not know goes to botocore."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator
from botocore.exceptions import ClientError

from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.lean import Fallback, LeanGetRecords, get_records, parse_reply
from kinesis_spout.kinesis.retrieval.lean import lean_of as lean_get_records
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream


def lean_of(client: Any) -> LeanGetRecords:
    lean = lean_get_records(client)
    assert lean is not None, "make_client gives its clients the lean GetRecords"
    return lean


def iterator(client: Any, stream: str, shard: str) -> str:
    it: str = client.get_shard_iterator(StreamName=stream, ShardId=shard,
                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    return it


def both(lean: LeanGetRecords, it: str, limit: int = 10_000) -> tuple[dict[str, Any], dict[str, Any]]:
    """(lean parse, botocore parse) of one and the same reply."""
    response = lean.request(it, limit)
    assert response.status_code == 200, response.content
    theirs = lean.botocore_parse(response)
    theirs.pop("ResponseMetadata", None)
    return parse_reply(response.content), theirs


def test_records_with_binary_data_and_unicode_keys_parse_as_botocore_parses_them(
        kinesis_backend: KinesisEndpoint) -> None:
    client = make_client(kinesis_backend.region, kinesis_backend.endpoint_url)
    stream = kinesis_backend.create_stream(shards=1)
    entries = [{"Data": os.urandom(1 + i * 37 % 300), "PartitionKey": f"clé-{i}-é€😀"} for i in range(60)]
    entries.append({"Data": bytes(range(256)), "PartitionKey": "all bytes"})
    client.put_records(StreamName=stream, Records=entries)
    shard = kinesis_backend.shard_ids(stream)[0]
    lean = lean_of(client)
    first = get_records(client, iterator(client, stream, shard), 10_000)  # through botocore: the template
    mine, theirs = both(lean, iterator(client, stream, shard))
    assert mine == theirs
    assert [r["Data"] for r in mine["Records"]] == [e["Data"] for e in entries]
    assert [r["PartitionKey"] for r in mine["Records"]] == [e["PartitionKey"] for e in entries]
    assert all(r["ApproximateArrivalTimestamp"].tzinfo is not None for r in mine["Records"])
    assert [r["SequenceNumber"] for r in first["Records"]] == [r["SequenceNumber"] for r in mine["Records"]]
    tip_mine, tip_theirs = both(lean, mine["NextShardIterator"])  # an empty reply at the tip
    assert tip_mine == tip_theirs and tip_mine["Records"] == []
    assert lean.calls >= 2 and lean.fallbacks == 0


def test_kpl_aggregates_parse_as_botocore_parses_them(kinesis_backend: KinesisEndpoint) -> None:
    client = make_client(kinesis_backend.region, kinesis_backend.endpoint_url)
    stream = kinesis_backend.create_stream(shards=1)
    aggregator = RecordAggregator()
    for i in range(50):
        assert aggregator.add_user_record(f"user-{i}", os.urandom(40)) is None
    pk, _, blob = aggregator.clear_and_get().get_contents()
    client.put_record(StreamName=stream, Data=blob, PartitionKey=pk)
    shard = kinesis_backend.shard_ids(stream)[0]
    get_records(client, iterator(client, stream, shard), 10)
    mine, theirs = both(lean_of(client), iterator(client, stream, shard))
    assert mine == theirs and mine["Records"][0]["Data"] == blob


def test_a_closed_shards_last_replies_parse_as_botocore_parses_them(kinesis_local: KinesisEndpoint) -> None:
    client = make_client(kinesis_local.region, kinesis_local.endpoint_url)
    stream = kinesis_local.create_stream(shards=1)
    client.put_records(StreamName=stream, Records=[{"Data": b"before", "PartitionKey": str(i)} for i in range(5)])
    shard = client.list_shards(StreamName=stream)["Shards"][0]
    low, high = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
    client.split_shard(StreamName=stream, ShardToSplit=shard["ShardId"], NewStartingHashKey=str((low + high) // 2))
    wait_for_stream(client, stream)
    lean = lean_of(client)
    get_records(client, iterator(client, stream, shard["ShardId"]), 10)
    it: str | None = iterator(client, stream, shard["ShardId"])
    children = None
    for _ in range(10):
        assert it is not None
        mine, theirs = both(lean, it, 2)
        assert mine == theirs
        children = mine.get("ChildShards") or children
        it = mine.get("NextShardIterator")
        if it is None:
            break
    assert it is None, "the closed shard did not end"
    assert children is not None and len(children) == 2
    assert all(c["ParentShards"] == [shard["ShardId"]] for c in children)


def test_an_error_raises_what_botocore_raises(kinesis_backend: KinesisEndpoint) -> None:
    client = make_client(kinesis_backend.region, kinesis_backend.endpoint_url)
    stream = kinesis_backend.create_stream(shards=1)
    shard = kinesis_backend.shard_ids(stream)[0]
    get_records(client, iterator(client, stream, shard), 10)
    client.delete_stream(StreamName=stream)
    time.sleep(0.2)
    it = "AAAAAAAAAAE" + "A" * 100  # not an iterator of this server
    with pytest.raises(ClientError) as theirs:
        client.get_records(ShardIterator=it, Limit=10)
    with pytest.raises(ClientError) as mine:
        get_records(client, it, 10)
    assert type(mine.value) is type(theirs.value)
    assert mine.value.response["Error"]["Code"] == theirs.value.response["Error"]["Code"]
    assert lean_of(client).fallbacks == 1


class Reply:
    """A reply as botocore's HTTP session returns it (what convert_to_response_dict reads)."""

    def __init__(self, body: dict[str, Any], status: int = 200) -> None:
        self.content = json.dumps(body).encode()
        self.status_code = status
        self.headers = {"x-amzn-RequestId": "r-1", "Content-Type": "application/x-amz-json-1.1"}


RECORD = {"SequenceNumber": "49590338271490256608559692538361571095921575989136588898", "Data": "aGVsbG8=",
          "PartitionKey": "pk", "ApproximateArrivalTimestamp": 1763800000.123}


@pytest.mark.parametrize("body", [
    {"Records": [RECORD], "NextShardIterator": "it-2", "MillisBehindLatest": 0},
    {"Records": [{**RECORD, "EncryptionType": "KMS"}], "NextShardIterator": "it-2", "MillisBehindLatest": 12},
    {"Records": [], "MillisBehindLatest": 0, "ChildShards": [
        {"ShardId": "shardId-000000000001", "ParentShards": ["shardId-000000000000"],
         "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "170141183460469231731687303715884105727"}}]},
    {"Records": [{k: v for k, v in RECORD.items() if k != "ApproximateArrivalTimestamp"}], "MillisBehindLatest": 0},
    {"Records": [], "NextShardIterator": None, "MillisBehindLatest": 0, "ChildShards": None},
])
def test_known_replies_parse_as_botocore_parses_the_same_bytes(body: dict[str, Any]) -> None:
    lean = LeanGetRecords(make_client("us-east-1", "http://127.0.0.1:9"))
    reply = Reply(body)
    theirs = lean.botocore_parse(reply)
    theirs.pop("ResponseMetadata")
    assert parse_reply(reply.content) == theirs


@pytest.mark.parametrize("body", [
    {"Records": [{**RECORD, "NewField": 1}], "MillisBehindLatest": 0},
    {"Records": [RECORD], "MillisBehindLatest": 0, "SomethingNew": True},
    {"Records": [{**RECORD, "ApproximateArrivalTimestamp": "2026-11-22T10:00:00Z"}], "MillisBehindLatest": 0},
    {"Records": [], "ChildShards": [{"ShardId": "s", "ParentShards": [], "HashKeyRange": {}, "Extra": 1}]},
    {"Records": [{**RECORD, "EncryptionType": None}], "MillisBehindLatest": 0},
])
def test_unknown_replies_are_left_to_botocore(body: dict[str, Any]) -> None:
    with pytest.raises(Fallback):
        parse_reply(json.dumps(body).encode())
