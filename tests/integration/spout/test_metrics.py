"""The metrics of a spout: the Prometheus endpoint scraped over HTTP during a real run on kinesalite (values move
as records flow, and the server lives from open() to close()), and ``metrics()`` counting what happened to each
record, the age of the stored checkpoint, the user record a checkpoint inside an aggregate names, and what befell a
shard that has closed."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kinesis_spout import (
    ConfigError,
    InitialPosition,
    JsonScheme,
    KinesisSpout,
    MemoryCheckpointStore,
    SpoutConfig,
)
from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.metrics import start_metrics_server
from kinesis_spout.metrics.shard import ShardMetrics
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain

from .support import TIMEOUT_S, make_config, next_tuple


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the endpoint: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def per_shard(samples: dict[Any, float], name: str) -> dict[str, float]:
    return {dict(labels)["shard"]: v for (n, labels), v in samples.items() if n == name}


def total(samples: dict[Any, float], name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def test_a_spout_s_metrics_endpoint_moves_as_records_flow(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=2)
    dead: list[str] = []
    config = SpoutConfig(stream_name=stream, app_name="metrics", endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, scheme=JsonScheme(), retry_limit=0,
                         dead_letter=lambda record, reason: dead.append(record.message_id), metrics_port=0)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        port = spout.metrics_server.port
        before = scrape(port)
        shards = kinesalite.shard_ids(stream)
        labels = (("app", "metrics"), ("shard", shards[0]), ("stream", stream))
        assert per_shard(before, "kinesis_spout_shard_owned") == {s: 1.0 for s in shards}
        assert total(before, "kinesis_spout_records_read_total") == 0
        assert before[("kinesis_spout_inflight_records", labels)] == 0

        datas = [json.dumps({"n": i}).encode() for i in range(40)] + [b"not json"]
        placed = kinesalite.put(stream, datas)
        size = sum(len(d) + len(f"pk-{i}") for i, d in enumerate(datas) if d != b"not json")
        assert wait_until(lambda: total(scrape(port), "kinesis_spout_records_read_total") == 41, 20)
        held = drain(spout, 5, ack=False)
        during = scrape(port)
        assert total(during, "kinesis_spout_inflight_records") == 5
        assert total(during, "kinesis_spout_inflight_bytes") == sum(t.record.size for t in held)
        assert total(during, "kinesis_spout_buffered_records") == 41 - 5 - total(
            during, "kinesis_spout_poison_records_total")
        spout.fail(held[0].message_id)  # no retries: a dead letter
        spout.ack_many(t.message_id for t in held[1:])
        rest = drain(spout, 35)
        assert len(rest) == 35
        assert wait_until(lambda: spout.next_tuple() is None and spout.poison_records == 1, 10)  # the last one
        assert spout.flush_checkpoints()
        after = scrape(port)
        assert total(after, "kinesis_spout_emitted_records_total") == 41
        assert total(after, "kinesis_spout_emitted_bytes_total") == size + len(b"not json") + len(
            f"pk-{datas.index(b'not json')}")
        assert total(after, "kinesis_spout_acked_records_total") == 39
        assert total(after, "kinesis_spout_failed_records_total") == 1
        assert total(after, "kinesis_spout_dead_letters_total") == 2 == len(dead)
        assert total(after, "kinesis_spout_dead_letters_pending") == 0
        assert total(after, "kinesis_spout_inflight_records") == 0
        assert after[("kinesis_spout_poison_records_total", (("app", "metrics"), ("stream", stream)))] == 1
        assert total(after, "kinesis_spout_checkpoint_writes_total") >= 2
        assert total(after, "kinesis_spout_getrecords_calls_total") > total(before,
                                                                            "kinesis_spout_getrecords_calls_total")
        assert set(per_shard(after, "kinesis_spout_behind_latest_seconds").values()) == {0.0}
        assert {s for s, _ in placed} == set(shards)

        ages = per_shard(after, "kinesis_spout_checkpoint_age_seconds")
        assert wait_until(lambda: all(per_shard(scrape(port), "kinesis_spout_checkpoint_age_seconds")[s] > ages[s]
                                      for s in shards), 5), "the age of an unmoving checkpoint does not grow"
        grown = per_shard(scrape(port), "kinesis_spout_checkpoint_age_seconds")
        kinesalite.put(stream, [b'{"n": 100}'], ["pk-0"])
        assert len(drain(spout, 1)) == 1 and spout.flush_checkpoints()
        moved = per_shard(scrape(port), "kinesis_spout_checkpoint_age_seconds")
        assert sum(moved[s] < grown[s] for s in shards) == 1  # the shard that took the record moved
    with pytest.raises(urllib.error.URLError):
        scrape(port)  # closed with the spout


def test_a_busy_port_is_a_clear_error_and_a_collector_refuses_other_objects(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=1)
    config = SpoutConfig(stream_name=stream, app_name="metrics", endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        server = start_metrics_server(0, spout, addr="127.0.0.1")
        try:
            busy = SpoutConfig(stream_name=stream, app_name="metrics-2", endpoint_url=kinesalite.endpoint_url,
                               region=kinesalite.region, metrics_port=server.port)
            other = KinesisSpout(busy, MemoryCheckpointStore())
            with pytest.raises(ConfigError, match=f"cannot serve metrics on 0.0.0.0:{server.port}"):
                other.open()
            other.close()
            assert total(scrape(server.port), "kinesis_spout_shard_owned") == 1
        finally:
            server.close()
            server.close()  # idempotent
    with pytest.raises(TypeError, match="needs a KinesisSpout or a SpoutPipeline"):
        start_metrics_server(0, object())
    with pytest.raises(ConfigError, match="metrics_port must be a whole number from 0 to 65,535"):
        SpoutConfig(stream_name="s", app_name="a", metrics_port=70000)


def test_metrics_count_what_happened_to_each_record_and_the_age_of_the_stored_checkpoint(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(5)], ["pk"] * 5)
    shard, seqs = placed[0][0], [seq for _, seq in placed]
    size = len(b"r0") + len("pk")
    dead: list[str] = []
    store = MemoryCheckpointStore()
    config = make_config(kinesalite, stream, retry_limit=1, message_timeout_s=1.5, worker_id="worker-7",
                         dead_letter=lambda record, reason: dead.append(record.message_id))
    with KinesisSpout(config, store) as spout:
        assert wait_until(lambda: spout.metrics()[0].buffered == 5, TIMEOUT_S), "the records were never read"
        before = spout.metrics()[0]
        assert (before.records_read, before.emitted, before.inflight, before.checkpoint) == (5, 0, 0, None)
        first = [next_tuple(spout) for _ in range(5)]
        taken = spout.metrics()[0]
        assert (taken.inflight, taken.inflight_bytes, taken.emitted, taken.emitted_bytes, taken.buffered) == \
            (5, 5 * size, 5, 5 * size, 0)
        spout.ack_many([first[0].message_id, first[1].message_id, first[3].message_id])
        spout.fail(first[2].message_id)
        assert spout.metrics()[0].retry_queue == 1
        again = next_tuple(spout)
        assert (again.message_id, again.attempt) == (first[2].message_id, 2)
        spout.fail(again.message_id)  # its last attempt: dead-lettered
        assert wait_until(lambda: dead == [first[2].message_id], TIMEOUT_S)
        late = next_tuple(spout)  # r4, never acked, times out and comes back
        assert (late.message_id, late.attempt) == (first[4].message_id, 2)
        spout.ack(late.message_id)
        assert spout.flush_checkpoints()
        metrics = spout.metrics()
        assert len(metrics) == 1
        m = metrics[0]
        assert m.checkpoint_age_s == 0.0, "the stored checkpoint just moved"
        assert m.millis_behind_latest is not None and m.getrecords_calls >= 1
        assert m == ShardMetrics(
            shard, seqs[-1], inflight=0, buffered=0, retry_queue=0, millis_behind_latest=m.millis_behind_latest,
            emitted=5, acked=4, failed=3, dead_lettered=1, finished=False, read_to_end=False, corrupt_aggregates=0,
            dead_letters_pending=0, inflight_bytes=0, emitted_bytes=5 * size, retried=2, timed_out=1,
            records_read=5, getrecords_calls=m.getrecords_calls, getrecords_retried_errors=0,
            expired_iterators=0, checkpoint_age_s=0.0)
        time.sleep(0.2)
        assert spout.metrics()[0].checkpoint_age_s >= 0.2, "the stored checkpoint has not moved since"
        assert spout.checkpoint_writes >= 1 and spout.checkpoint_write_failures == 0
    stored = store.load(shard)
    assert stored is not None and (stored.sequence_number, stored.owner) == (seqs[-1], "worker-7")
    with KinesisSpout(config, store) as restarted:  # a restart knows its checkpoint before reading anything
        assert restarted.metrics()[0].checkpoint == seqs[-1]
        assert restarted.next_batch(max_records=10, timeout_s=0.3) == []


def test_after_a_restart_inside_an_aggregate_the_metrics_show_the_stored_user_record(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [b"x"], ["pk"])
    shard, seq = placed[0]
    store = MemoryCheckpointStore()
    store.save(Checkpoint(shard, seq, 0))  # inside an aggregate, after its user record 0
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        assert spout.metrics()[0].checkpoint == f"{seq}:0"


def test_metrics_port_serves_the_spout_s_metrics_until_close(kinesalite: KinesisEndpoint) -> None:
    import urllib.request

    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [b"m"], ["pk"])
    with KinesisSpout(make_config(kinesalite, stream, metrics_port=0), MemoryCheckpointStore()) as served:
        tup = next_tuple(served)
        served.ack(tup.message_id)
        port = served.metrics_server.port
        assert port > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        assert f'shard="{placed[0][0]}"' in text and "kinesis_spout_inflight_records" in text
    assert served.metrics_server is None
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
    with KinesisSpout(make_config(kinesalite, stream), MemoryCheckpointStore()) as plain:
        assert plain.metrics_server is None
    missing = KinesisSpout(make_config(kinesalite, "no-such-stream", metrics_port=0), MemoryCheckpointStore())
    with pytest.raises(Exception, match="no-such-stream"):
        missing.open()
    assert missing.metrics_server is None, "a failed open() left the metrics server running"


def test_metrics_of_a_closed_shard_count_corrupt_aggregates_retried_errors_expired_iterators_and_pending_letters(
        kinesalite: KinesisEndpoint) -> None:
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        through = KinesisEndpoint("kinesalite+faults", proxy.endpoint_url, region=kinesalite.region,
                                  real_sequence_numbers=True)
        _closed_shard_metrics(kinesalite, proxy, through)


def _closed_shard_metrics(kinesalite: KinesisEndpoint, proxy: FaultProxy, through: KinesisEndpoint) -> None:
    """The body of the test above: kinesalite (closed shards end), read through a fault-injecting proxy."""
    import hashlib

    from kinesis_spout.kinesis.aggregation import MAGIC

    client = kinesalite.client()
    stream = kinesalite.create_stream()
    parent = kinesalite.shard_ids(stream)[0]
    corrupt = MAGIC + b"\x0a\x01k" + hashlib.md5(b"something else").digest()
    placed = kinesalite.put(stream, [corrupt, b"plain"], ["pk"] * 2)
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    proxy.inject("GetRecords", "ProvisionedThroughputExceededException", shard_id=parent)
    proxy.inject("GetRecords", "ExpiredIteratorException", shard_id=parent)
    release = threading.Event()
    dead: list[str] = []

    def blocked(record: Any, reason: str) -> None:
        assert release.wait(TIMEOUT_S)
        dead.append(record.message_id)

    config = make_config(through, stream, retry_limit=0, dead_letter=blocked)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        first, second = next_tuple(spout), next_tuple(spout)
        assert (first.record.data, second.record.data) == (corrupt, b"plain")
        spout.ack(second.message_id)
        spout.fail(first.message_id)  # no retries: its dead letter waits for the handler

        def of_parent() -> Any:
            return next(m for m in spout.metrics() if m.shard_id == parent)

        assert wait_until(lambda: of_parent().read_to_end and of_parent().dead_letters_pending == 1, TIMEOUT_S)
        m = of_parent()
        assert (m.corrupt_aggregates, m.getrecords_retried_errors, m.expired_iterators) == (1, 1, 1)
        assert (m.read_to_end, m.finished, m.inflight, m.dead_letters_pending, m.dead_lettered) == \
            (True, False, 1, 1, 0)
        release.set()
        assert wait_until(lambda: spout.next_tuple() is None and of_parent().finished, TIMEOUT_S)
        m = of_parent()
        assert (m.finished, m.inflight, m.dead_letters_pending, m.dead_lettered, m.checkpoint) == \
            (True, 0, 0, 1, placed[1][1])
    assert dead == [first.message_id]
