"""``KinesisLagListener`` on progress as Spark reports it: the lag of kinesis_spout sources (others ignored), its
gauges at scrape time, and a terminated query forgotten; ``latest_offset`` and ``parse_latest_offset`` agree."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from kinesis_spout.spark.source.lag import ShardLag, latest_offset, parse_latest_offset
from kinesis_spout.spark.source.lag_listener import KinesisLagListener

ARRIVED = datetime(2026, 11, 29, 9, 30, tzinfo=timezone.utc)
SHARDS = [ShardLag("shardId-1", "42", 1500, ARRIVED, 7), ShardLag("shardId-2", "TRIM_HORIZON", None, None, None)]


def progress(name: str | None = "orders") -> dict[str, object]:
    offset = json.dumps(latest_offset("s", "a", SHARDS))
    return {"id": "1234", "name": name, "batchId": 3,
            "sources": [{"description": "RateStreamV2", "latestOffset": "{\"0\": 10}"},
                        {"description": "kinesis_spout", "latestOffset": offset}]}


def test_the_latest_offset_reads_back_as_written() -> None:
    lag = parse_latest_offset(json.dumps(latest_offset("s", "a", SHARDS)))
    assert lag is not None and lag.shards == tuple(SHARDS)
    assert (lag.millis_behind_latest, lag.records_behind) == (1500, 7)
    assert parse_latest_offset('{"shardId-1": "42"}') is None and parse_latest_offset(None) is None
    assert "1500 ms behind latest, 7 records read and not processed (1 of 2 shards behind" in lag.describe()


def test_the_listener_exports_each_shard_and_the_total_then_forgets_a_terminated_query() -> None:
    listener = KinesisLagListener()
    assert [lag.app for lag in listener.observe(progress())] == ["a"]  # the rate source is not kinesis_spout's
    registry = CollectorRegistry(auto_describe=False)
    registry.register(listener.collector())
    page = generate_latest(registry).decode()
    assert 'kinesis_spout_query_behind_latest_seconds{app="a",query="orders",shard="shardId-1",stream="s"} 1.5' \
        in page
    assert 'kinesis_spout_query_records_behind{app="a",query="orders",shard="shardId-1",stream="s"} 7.0' in page
    assert 'kinesis_spout_query_last_arrival_timestamp_seconds{app="a",query="orders",shard="shardId-1",' \
           'stream="s"} 1.7959446e+09' in page
    assert 'kinesis_spout_query_max_behind_latest_seconds{app="a",query="orders",stream="s"} 1.5' in page
    assert 'shard="shardId-2"' not in page  # nothing known of it
    listener.onQueryTerminated(SimpleNamespace(id="1234", name="orders"))
    assert listener.lags == {} and "query=" not in generate_latest(registry).decode()


def test_a_query_without_a_name_is_known_by_its_id() -> None:
    listener = KinesisLagListener(log_level=None)
    listener.observe(progress(name=None))
    assert [query for query, _ in listener.lags] == ["1234"]
