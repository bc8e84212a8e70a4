"""Faults the emulators never produce, injected for real by FaultProxy, and how the library's readers take them."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError

from kinesis_spout.errors import KinesisError, SpoutStateError
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.polling import ShardGetter
from kinesis_spout.kinesis.retrieval.reader import BufferedShardReader
from kinesis_spout.positions import LATEST, TRIM_HORIZON, after
from kinesis_spout.records import Record
from kinesis_spout.testing.faults import DROPPED, FaultProxy  # the fault_proxy fixture comes from the plugin
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

PTEE = "ProvisionedThroughputExceededException"
TIMEOUT_S = 20.0

Proxied = tuple[FaultProxy, KinesisEndpoint]


def _client(endpoint: KinesisEndpoint) -> Any:
    """The library's own client (botocore retries off: one attempt per call) pointed at ``endpoint``."""
    return make_client(endpoint.region, endpoint.endpoint_url, read_timeout_s=10.0)


def _stream_with_records(backend: KinesisEndpoint, n: int, shards: int = 1) -> tuple[str, list[tuple[str, str]]]:
    stream = backend.create_stream(shards=shards)
    placed = backend.put(stream, [f"record-{i:04d}".encode() for i in range(n)])
    return stream, placed


def _expected(placed: list[tuple[str, str]], shard: str) -> list[int]:
    return [int(seq) for s, seq in placed if s == shard]


def _read_until(getter: ShardGetter, count: int, out: list[Record], timeout_s: float = TIMEOUT_S) -> None:
    """Fetch until ``out`` holds ``count`` records (fails the test at the deadline)."""

    def enough() -> bool:
        out.extend(getter.fetch().records)
        return len(out) >= count

    assert wait_until(enough, timeout_s, interval_s=0.0), f"read {len(out)} of {count} records in {timeout_s} s"


def _new_reader(getter: ShardGetter, signal: threading.Event) -> BufferedShardReader:
    return BufferedShardReader(getter, max_records=1000, max_bytes=1 << 20, empty_backoff_s=0.2,
                               on_data=signal.set)


def _drain(reader: BufferedShardReader, signal: threading.Event, count: int,
           timeout_s: float = TIMEOUT_S) -> list[Record]:
    """Take records from a started reader until ``count`` arrived, waiting on its data signal with a deadline."""
    out: list[Record] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"took {len(out)} of {count} records in {timeout_s} s"
        signal.wait(min(remaining, 0.5))
        signal.clear()
        out.extend(reader.take_upto(10_000, 1 << 30))
    return out


def _read_all(getter: ShardGetter, count: int) -> tuple[BufferedShardReader, list[Record]]:
    """Start a reader on ``getter``, take ``count`` records from it, close it."""
    signal = threading.Event()
    reader = _new_reader(getter, signal)
    reader.start()
    try:
        return reader, _drain(reader, signal, count)
    finally:
        reader.close()


def _reader_threads(shard_id: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"kinesis-reader-{shard_id}" and t.is_alive()]


# -- the proxy itself ------------------------------------------------------------------------------------------


def test_proxy_needs_start_and_closes_idempotently(moto_kinesis: KinesisEndpoint) -> None:
    proxy = FaultProxy(moto_kinesis.endpoint_url)
    with pytest.raises(SpoutStateError, match="not started"):
        _ = proxy.endpoint_url
    with proxy:
        assert proxy.start() is proxy
        url = proxy.endpoint_url
        assert url.startswith("http://127.0.0.1:")
        assert _client(KinesisEndpoint("p", url)).list_streams()["StreamNames"] == []
    proxy.close()
    with pytest.raises(SpoutStateError):
        proxy.start()
    with pytest.raises(ValueError, match="http"):
        FaultProxy("127.0.0.1:1234")


def test_injected_throttles_are_delivered_exactly_times_then_calls_pass(fault_proxy: Proxied,
                                                                         kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream, placed = _stream_with_records(kinesis_backend, 3)
    client = _client(through)
    shard = placed[0][0]
    iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard,
                                         ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    proxy.inject("GetRecords", PTEE, times=3, message="Rate exceeded for shard")
    assert proxy.pending() == 3
    for _ in range(3):
        with pytest.raises(ClientError) as caught:
            client.get_records(ShardIterator=iterator)
        error = caught.value.response
        assert error["Error"]["Code"] == PTEE
        assert error["Error"]["Message"] == "Rate exceeded for shard"
        assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert error["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"] == PTEE
    records = client.get_records(ShardIterator=iterator)["Records"]
    assert [int(r["SequenceNumber"]) for r in records] == _expected(placed, shard)
    assert proxy.calls["GetRecords"] == 4
    assert proxy.calls["GetShardIterator"] == 1
    assert proxy.injected == {f"GetRecords:{PTEE}": 3}
    assert proxy.pending() == 0
    # other operations and the upstream's own errors pass through untouched
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.describe_stream_summary(StreamName="no-such-stream")
    assert proxy.injected == {f"GetRecords:{PTEE}": 3}


def test_error_codes_and_statuses_map_onto_the_library_errors(fault_proxy: Proxied,
                                                               kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    client = _client(through)
    proxy.inject("ListShards", "InternalFailure", status=500)
    proxy.inject("ListShards", "ResourceNotFoundException", message="Stream gone")
    with pytest.raises(ClientError) as caught:
        client.list_shards(StreamName=stream)
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert caught.value.response["Error"]["Code"] == "InternalFailure"
    with pytest.raises(client.exceptions.ResourceNotFoundException, match="Stream gone"):
        client.list_shards(StreamName=stream)
    assert len(client.list_shards(StreamName=stream)["Shards"]) == 1
    assert proxy.injected == {"ListShards:InternalFailure": 1, "ListShards:ResourceNotFoundException": 1}


def test_keep_alive_connection_serves_many_requests_and_survives_an_injected_error(moto_kinesis: KinesisEndpoint
                                                                                   ) -> None:
    with FaultProxy(moto_kinesis.endpoint_url) as proxy:
        proxy.inject("ListStreams", "InternalFailure", status=500)
        port = int(proxy.endpoint_url.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            statuses = []
            for _ in range(3):
                conn.request("POST", "/", body=b"{}", headers={
                    "X-Amz-Target": "Kinesis_20131202.ListStreams", "Content-Type": "application/x-amz-json-1.1",
                    "Authorization": "AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/kinesis/aws4_request, "
                                     "SignedHeaders=host, Signature=0"})
                response = conn.getresponse()
                body = json.loads(response.read())
                statuses.append(response.status)
                assert not response.will_close
                if response.status == 500:
                    assert body == {"__type": "InternalFailure", "message": "injected fault"}
                else:
                    assert body["StreamNames"] == []
        finally:
            conn.close()
        assert statuses == [500, 200, 200]
        assert proxy.calls["ListStreams"] == 3


def test_dropped_connection_is_a_connection_error_for_botocore(fault_proxy: Proxied) -> None:
    proxy, through = fault_proxy
    client = _client(through)
    client.list_streams()  # a pooled keep-alive connection exists before the drop
    proxy.drop_connections("ListStreams")
    with pytest.raises(ConnectionClosedError):
        client.list_streams()
    assert client.list_streams()["StreamNames"] is not None
    assert proxy.injected == {f"ListStreams:{DROPPED}": 1}
    assert proxy.calls["ListStreams"] == 3


def test_inject_validates_its_arguments(moto_kinesis: KinesisEndpoint) -> None:
    proxy = FaultProxy(moto_kinesis.endpoint_url)
    with pytest.raises(ValueError, match="times"):
        proxy.inject("GetRecords", PTEE, times=0)
    with pytest.raises(ValueError, match="bare"):
        proxy.inject("Kinesis_20131202.GetRecords", PTEE)
    with pytest.raises(ValueError, match="shard_id"):
        proxy.inject("ListShards", PTEE, shard_id="shardId-000000000000")
    with pytest.raises(ValueError, match="status"):
        proxy.inject("GetRecords", PTEE, status=200)
    proxy.inject("GetRecords", PTEE, times=2)
    proxy.clear()
    assert proxy.pending() == 0


def test_refused_put_entries_are_answered_as_kinesis_does_and_only_the_others_are_stored(
        fault_proxy: Proxied, kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    client = _client(through)
    proxy.refuse_records({1: "InternalFailure", 3: PTEE}, {}, {0: "InternalFailure"}, {0: PTEE, 9: PTEE})
    records = [{"Data": f"d{i}".encode(), "PartitionKey": f"k{i}"} for i in range(4)]
    first = client.put_records(StreamName=stream, Records=records)
    assert first["FailedRecordCount"] == 2
    assert [r.get("ErrorCode") for r in first["Records"]] == [None, "InternalFailure", None, PTEE]
    assert all(r.get("SequenceNumber") for r in (first["Records"][0], first["Records"][2]))
    assert client.put_records(StreamName=stream, Records=records[1:2])["FailedRecordCount"] == 0  # {}: passes
    alone = client.put_records(StreamName=stream, Records=records[3:])  # every entry refused: nothing forwarded
    assert (alone["FailedRecordCount"], alone["Records"][0]["ErrorCode"]) == (1, "InternalFailure")
    last = client.put_records(StreamName=stream, Records=records[3:])  # index 9 is beyond the call: ignored
    assert [r.get("ErrorCode") for r in last["Records"]] == [PTEE]
    assert client.put_records(StreamName=stream, Records=records[3:])["FailedRecordCount"] == 0  # script done
    assert proxy.pending() == 0
    assert proxy.injected == {"PutRecords:InternalFailure": 2, f"PutRecords:{PTEE}": 2}
    shard = kinesis_backend.shard_ids(stream)[0]
    iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard,
                                         ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    stored = [r["Data"] for r in client.get_records(ShardIterator=iterator)["Records"]]
    assert stored == [b"d0", b"d2", b"d1", b"d3"]
    with pytest.raises(ValueError, match="entry index"):
        proxy.refuse_records({-1: PTEE})
    with pytest.raises(ValueError, match="one mapping"):
        proxy.refuse_records()


# -- the shard getter: expired iterators ----------------------------------------------------------------------


def test_getter_reseeks_after_the_last_record_when_its_iterator_expires(fault_proxy: Proxied,
                                                                        kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream, placed = _stream_with_records(kinesis_backend, 23)
    shard = placed[0][0]
    getter = ShardGetter(_client(through), stream, shard, TRIM_HORIZON, max_records=5)
    out = getter.fetch().records
    assert len(out) == 5
    proxy.inject("GetRecords", "ExpiredIteratorException", message="Iterator expired")
    _read_until(getter, 23, out)
    assert [r.key.sequence for r in out] == _expected(placed, shard)
    assert [r.data for r in out] == [f"record-{i:04d}".encode() for i in range(23)]
    assert getter.fetch().records == []  # nothing read twice after the re-seek
    assert getter.expired_iterators == 1
    assert proxy.injected == {"GetRecords:ExpiredIteratorException": 1}
    assert proxy.calls["GetShardIterator"] == 2
    assert getter.position == after(out[-1].sequence_number)


def test_shard_limited_faults_hit_only_that_shard(fault_proxy: Proxied, kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream, placed = _stream_with_records(kinesis_backend, 40, shards=2)
    first, second = kinesis_backend.shard_ids(stream)
    assert _expected(placed, first) and _expected(placed, second), placed
    client = _client(through)
    getters = {s: ShardGetter(client, stream, s, TRIM_HORIZON, max_records=3)
               for s in (first, second)}
    reads: dict[str, list[Record]] = {s: g.fetch().records for s, g in getters.items()}
    # GetRecords carries only an iterator: the proxy must know which shard it belongs to
    proxy.inject("GetRecords", "ExpiredIteratorException", shard_id=second)
    proxy.inject("GetShardIterator", PTEE, shard_id=first)
    for shard in (first, second):
        _read_until(getters[shard], len(_expected(placed, shard)), reads[shard])
        assert [r.key.sequence for r in reads[shard]] == _expected(placed, shard)
    assert getters[first].expired_iterators == 0
    assert getters[second].expired_iterators == 1
    assert proxy.injected == {"GetRecords:ExpiredIteratorException": 1}
    assert proxy.pending() == 1  # the first shard never asked for a new iterator
    with pytest.raises(KinesisError, match="throttled") as caught:
        ShardGetter(client, stream, first, TRIM_HORIZON).fetch()
    assert caught.value.retriable
    assert proxy.injected[f"GetShardIterator:{PTEE}"] == 1


# -- the buffered reader: throttling, non-retriable errors, server errors, lost connections ---------------------


def test_reader_rides_out_throttling(fault_proxy: Proxied, kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream, placed = _stream_with_records(kinesis_backend, 30)
    shard = placed[0][0]
    proxy.inject("GetRecords", PTEE, times=3)
    reader, records = _read_all(ShardGetter(_client(through), stream, shard, TRIM_HORIZON), 30)
    assert [r.key.sequence for r in records] == _expected(placed, shard)
    assert reader.retried_errors == 3
    assert proxy.injected == {f"GetRecords:{PTEE}": 3}
    assert reader.take_upto(10, 1 << 30) == []  # no error stored


def test_reader_stops_promptly_on_access_denied(fault_proxy: Proxied, kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream, placed = _stream_with_records(kinesis_backend, 5)
    shard = placed[0][0]
    proxy.inject("GetRecords", "AccessDeniedException", times=100,
                 message="User is not authorized to perform: kinesis:GetRecords")
    signal = threading.Event()
    reader = _new_reader(ShardGetter(_client(through), stream, shard, TRIM_HORIZON), signal)
    errors: list[KinesisError] = []

    def failed() -> bool:
        try:
            reader.take_upto(10, 1 << 30)
        except KinesisError as exc:
            errors.append(exc)
            return True
        return False

    started = time.monotonic()
    reader.start()
    try:
        assert signal.wait(TIMEOUT_S), "the reader never signalled its error"
        assert wait_until(failed, 5.0), "take_upto() did not raise the reader's error"
        elapsed = time.monotonic() - started
        assert wait_until(lambda: not _reader_threads(shard), 5.0), "the reader thread is still running"
    finally:
        reader.close()
    error = errors[0]
    assert error.code == "AccessDeniedException"
    assert not error.retriable
    assert "AccessDenied" in str(error) and "credentials" in str(error)
    assert elapsed < 5.0
    assert proxy.calls["GetRecords"] == 1  # not retried
    assert reader.retried_errors == 0
    assert reader.exhausted
    with pytest.raises(KinesisError, match="AccessDenied"):
        reader.take_upto(1, 1 << 30)  # and it stays raised


def test_reader_recovers_from_internal_failures(fault_proxy: Proxied, kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream, placed = _stream_with_records(kinesis_backend, 12)
    shard = placed[0][0]
    proxy.inject("GetRecords", "InternalFailure", status=500, times=2)
    reader, records = _read_all(ShardGetter(_client(through), stream, shard, TRIM_HORIZON), 12)
    assert [r.key.sequence for r in records] == _expected(placed, shard)
    assert reader.retried_errors == 2
    assert proxy.injected == {"GetRecords:InternalFailure": 2}


def test_reader_recovers_from_a_dropped_connection(fault_proxy: Proxied, kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream, placed = _stream_with_records(kinesis_backend, 20)
    shard = placed[0][0]
    getter = ShardGetter(_client(through), stream, shard, TRIM_HORIZON, max_records=7)
    proxy.drop_connections("GetRecords", times=1)
    reader, records = _read_all(getter, 20)
    assert [r.key.sequence for r in records] == _expected(placed, shard)
    assert reader.retried_errors == 1
    assert proxy.injected == {f"GetRecords:{DROPPED}": 1}
    assert reader.take_upto(10, 1 << 30) == []


def test_closing_the_proxy_ends_its_connection_threads(moto_kinesis: KinesisEndpoint) -> None:
    proxy = FaultProxy(moto_kinesis.endpoint_url).start()
    client = _client(KinesisEndpoint("p", proxy.endpoint_url))
    client.list_streams()  # leaves an idle keep-alive connection (and its thread) open
    assert [t for t in threading.enumerate() if t.name.startswith("fault-proxy-conn-")]
    proxy.close()
    proxy.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("fault-proxy-conn-") and t.is_alive()]


def test_iterators_not_seen_by_the_proxy_are_known_only_on_moto(fault_proxy: Proxied,
                                                                kinesis_backend: KinesisEndpoint) -> None:
    """moto's iterators decode to their shard; kinesalite's are encrypted, so a shard-limited fault needs the
    proxy to have passed the iterator (or its predecessor) to the client."""
    proxy, through = fault_proxy
    stream, placed = _stream_with_records(kinesis_backend, 3)
    shard = placed[0][0]
    iterator = kinesis_backend.client().get_shard_iterator(  # straight from the emulator, not through the proxy
        StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    proxy.inject("GetRecords", PTEE, shard_id=shard)
    client = _client(through)
    if kinesis_backend.real_sequence_numbers:  # kinesalite
        assert len(client.get_records(ShardIterator=iterator)["Records"]) == 3
        assert proxy.pending() == 1
    else:
        with pytest.raises(ClientError, match=PTEE):
            client.get_records(ShardIterator=iterator)
        assert proxy.pending() == 0


def test_missing_credentials_are_not_retried(fault_proxy: Proxied, kinesis_backend: KinesisEndpoint,
                                             monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    getter = ShardGetter(_client(through), stream, "shardId-000000000000", TRIM_HORIZON)
    with pytest.raises(KinesisError, match="credentials") as caught:
        getter.fetch()
    assert proxy.calls["GetShardIterator"] == 0  # refused before any request was sent
    assert not caught.value.retriable, "a reader would retry missing credentials for minutes"


def test_expired_iterator_before_the_first_record_at_latest_loses_nothing(
        fault_proxy: Proxied, kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    shard = kinesis_backend.shard_ids(stream)[0]
    getter = ShardGetter(_client(through), stream, shard, LATEST)
    assert getter.fetch().records == []  # the iterator now stands at the tip
    placed = kinesis_backend.put(stream, [b"a", b"b", b"c"])
    proxy.inject("GetRecords", "ExpiredIteratorException")
    out: list[Record] = []

    def all_three() -> bool:
        out.extend(getter.fetch().records)
        return len(out) >= 3

    wait_until(all_three, 3.0)
    assert getter.expired_iterators == 1
    assert [r.key.sequence for r in out] == _expected(placed, shard)
