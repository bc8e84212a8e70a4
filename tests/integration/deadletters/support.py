"""What the dead-letter tests share: a spout run that dead-letters six poison records, and a whole stream read
back. Who calls: the replay tests of this folder."""

from __future__ import annotations

import json
import time
from typing import Any

from kinesis_spout import InitialPosition, JsonScheme, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.spout import drain


def read_all(endpoint: KinesisEndpoint, stream: str) -> list[dict[str, Any]]:
    """Every record of ``stream`` (GetRecords from each shard's trim horizon, up to 10,000 a shard)."""
    client = endpoint.client()
    out: list[dict[str, Any]] = []
    for shard in endpoint.shard_ids(stream):
        iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard,
                                             ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        out += client.get_records(ShardIterator=iterator, Limit=10_000)["Records"]
    return out


def spout_letters(endpoint: KinesisEndpoint, stream: str, dead_letter: Any) -> list[tuple[bytes, str]]:
    """Run a JsonScheme spout over 6 poison records among good ones; returns the poison (data, partition key)."""
    data: list[str] = []
    keys: list[str] = []
    for i in range(6):
        data += [json.dumps({"n": i}), f"poison {i}"]
        keys += [f"good-{i}", f"pk-{i}"]
    data.append("{}")
    keys.append("end")
    endpoint.put(stream, data, partition_keys=keys)
    config = SpoutConfig(stream_name=stream, app_name="replay", endpoint_url=endpoint.endpoint_url,
                         region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2, scheme=JsonScheme(), dead_letter=dead_letter)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        got = drain(spout, 7)
        deadline = time.monotonic() + 20
        while spout.poison_records < 6 and time.monotonic() < deadline:  # a shard may end with a poison record
            got += drain(spout, 1, timeout_s=0.5)
        assert len(got) == 7 and spout.poison_records == 6
        assert spout.flush_checkpoints()
    return sorted((d.encode(), k) for d, k in zip(data, keys) if d.startswith("poison"))
