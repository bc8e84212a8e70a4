"""A batch's INFO line is short: the lag summed up (max lag, shards behind), each shard's lag in a DEBUG line."""

from __future__ import annotations

from datetime import datetime, timezone

from kinesis_spout.spark.pipeline.metrics import BatchMetrics


def batch(lag_ms: dict[str, int | None], error: str | None = None) -> BatchMetrics:
    return BatchMetrics(batch_id=7, records=6340, bytes=263768, retries=14, acked=6326, failed=14, error=error,
                        started_at=datetime(2026, 1, 1, tzinfo=timezone.utc), dataframe_s=0.128, process_s=0.386,
                        latency_s=0.548, lag_ms=lag_ms)


SIXTEEN = {f"shardId-{n:012d}": (n * 100 if n % 3 else 0) for n in range(16)}


def test_the_info_line_sums_up_the_lag_whatever_the_number_of_shards() -> None:
    line = batch(SIXTEEN).describe()
    assert len(line) <= 180, (len(line), line)
    assert "shardId-" not in line, line
    assert "6340 records" in line and "6326 acked, 14 failed" in line, line
    assert "lag max 1400 ms, 10 of 16 shards behind" in line, line


def test_shards_caught_up_or_not_read_yet() -> None:
    assert "lag 0 ms, 0 of 2 shards behind" in batch({"a": 0, "b": 0}).describe()
    assert "lag max 5 ms, 1 of 3 shards behind, 1 not read yet" in batch({"a": 5, "b": 0, "c": None}).describe()
    assert "no shards" in batch({}).describe()
    assert batch({"a": 0}, error="ValueError('bad')").describe().endswith("; process() raised ValueError('bad')")


def test_the_debug_line_gives_each_shard_s_lag() -> None:
    line = batch({"shardId-2": None, "shardId-1": 120}).describe_lags()
    assert line == "batch 7 lag ms by shard: shardId-1 120, shardId-2 ? (not read yet)", line
