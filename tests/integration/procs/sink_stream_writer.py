"""A Spark driver for the sink's crash test: a streaming query from a directory of text files (two files per
micro-batch) into a Kinesis stream with ``writeStream.format("kinesis_spout")`` and a Spark checkpoint location.

Each line of the files is a row id; it is written as the record's data, with partition key ``k<id % 13>``. The query
runs with ``Trigger.AvailableNow``: it writes every file present when it starts, then exits with code 0. The crash
test SIGKILLs it mid-run and starts it again with the same checkpoint location.
"""

from __future__ import annotations

import argparse
import sys

from kinesis_spout.spark import register
from kinesis_spout.testing.spark import local_spark_session


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--input", required=True)
    p.add_argument("--stream", required=True)
    p.add_argument("--endpoint-url", required=True)
    p.add_argument("--checkpoint-location", required=True)
    p.add_argument("--aggregate", default="false")
    args = p.parse_args()

    spark = local_spark_session("kinesis-spout-sink-crash")
    register(spark)
    lines = spark.readStream.format("text").option("maxFilesPerTrigger", 2).load(args.input)
    rows = lines.selectExpr("concat('k', CAST(CAST(value AS INT) % 13 AS STRING)) AS partitionKey",
                            "value AS data")
    query = (rows.writeStream.format("kinesis_spout").option("streamName", args.stream)
             .option("endpointUrl", args.endpoint_url).option("region", "us-east-1")
             .option("aggregate", args.aggregate)
             .option("checkpointLocation", args.checkpoint_location).trigger(availableNow=True).start())
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
