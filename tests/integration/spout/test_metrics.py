"""The Prometheus endpoint of a spout, scraped over HTTP during a real run on kinesalite: values move as records
flow, and the server lives from open() to close()."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kinesis_spout import ConfigError, InitialPosition, JsonScheme, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.metrics import start_metrics_server
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain


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
