"""``readMode=auto`` end to end on ``local[2]``: a source registered with ``kinesis_spout.spark.register(spark)``
reads on the driver there (the offsets Spark stores are the driver mode's: one position per shard), and reads every
record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kinesis_spout.spark import register
from kinesis_spout.testing.kinesis import KinesisEndpoint


def test_register_records_a_local_master_and_auto_reads_on_the_driver(spark: Any, kinesalite: KinesisEndpoint,
                                                                      zookeeper: Any, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=2)
    placed = kinesalite.put(stream, [f"auto-{i}".encode() for i in range(30)])
    source = register(spark)
    assert source.spark_master == spark.sparkContext.master
    df = (spark.readStream.format("kinesis_spout")
          .options(streamName=stream, appName="read-mode-auto", zookeeper=zookeeper.hosts,
                   zookeeperPrefix=zookeeper.prefix, endpointUrl=kinesalite.endpoint_url, region=kinesalite.region,
                   initialPosition="TRIM_HORIZON")
          .load())
    rows: list[str] = []
    query = (df.writeStream.option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True)
             .foreachBatch(lambda batch, _: rows.extend(r.message_id for r in batch.select("message_id").collect()))
             .start())
    assert query.awaitTermination(120), "the AvailableNow query did not end"
    assert sorted(rows) == sorted(f"{s}:{q}" for s, q in placed)
    offsets = sorted((p for p in (tmp_path / "checkpoint" / "offsets").iterdir() if p.name.isdigit()),
                     key=lambda p: int(p.name))
    stored = json.loads(offsets[-1].read_text().splitlines()[-1])
    assert set(stored) == {s for s, _ in placed}, f"not the driver mode's offset: {stored}"
