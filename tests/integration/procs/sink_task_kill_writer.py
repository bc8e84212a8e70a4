"""A Spark driver for the sink's task-kill test: a streaming query from a directory of text files (one file per
micro-batch) into a Kinesis stream with the ``kinesis_spout`` sink, in a ``local[2, 4]`` session (a failed task is
run again, up to 4 attempts, as on a cluster).

The sink's writer is wrapped (data source ``kinesis_spout_gated``) by a spy that changes nothing it writes: the first
task attempt of the query to reach its second Arrow batch (after its first batch was put) writes its Python worker's
pid to ``GATE/pid`` and waits there, so the test can SIGKILL that worker in the middle of the task. Later attempts
pass the gate. Each line of the files is a row id, written as the record's data with partition key ``k<id>``. The
query runs with ``Trigger.AvailableNow`` and exits with code 0 when every file is written.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import Any, Iterator

from pyspark.sql.datasource import DataSourceStreamArrowWriter

from kinesis_spout.spark.sink import make_writer
from kinesis_spout.spark.source import KinesisSpoutDataSource


class GatedWriter(DataSourceStreamArrowWriter):
    """The sink's stream writer, held once at ``gate`` after the first Arrow batch of the first task attempt."""

    def __init__(self, inner: Any, gate: str) -> None:
        self.inner = inner
        self.gate = gate

    def write(self, iterator: Iterator[Any]) -> Any:
        return self.inner.write(self._gated(iterator))

    def _gated(self, iterator: Iterator[Any]) -> Iterator[Any]:
        for n, batch in enumerate(iterator):
            if n == 1 and self._first_to_arrive():
                tmp = os.path.join(self.gate, "pid.tmp")
                with open(tmp, "w") as f:
                    f.write(str(os.getpid()))
                os.replace(tmp, os.path.join(self.gate, "pid"))
                threading.Event().wait(120)  # SIGKILLed here by the test
                raise RuntimeError("the test did not kill this Python worker")
            yield batch

    def _first_to_arrive(self) -> bool:
        try:
            os.close(os.open(os.path.join(self.gate, "armed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        self.inner.commit(messages, batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        self.inner.abort(messages, batchId)


class GatedSink(KinesisSpoutDataSource):
    @classmethod
    def name(cls) -> str:
        return "kinesis_spout_gated"

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:  # noqa: N802 - Spark's name
        options = {k: v for k, v in self.options.items() if k.lower() != "gate"}
        return GatedWriter(make_writer(options, schema, overwrite, streaming=True), self.options["gate"])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--input", required=True)
    p.add_argument("--stream", required=True)
    p.add_argument("--endpoint-url", required=True)
    p.add_argument("--checkpoint-location", required=True)
    p.add_argument("--gate", required=True)
    args = p.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2, 4]").appName("kinesis-spout-sink-task-kill")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "20")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(GatedSink)
    lines = spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(args.input)
    query = (lines.selectExpr("concat('k', value) AS partitionKey", "value AS data").writeStream
             .format("kinesis_spout_gated").option("gate", args.gate).option("streamName", args.stream)
             .option("endpointUrl", args.endpoint_url).option("region", "us-east-1")
             .option("checkpointLocation", args.checkpoint_location).trigger(availableNow=True).start())
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
