"""The ``kinesis_spout`` sink: ``df.write`` and ``writeStream`` into a Kinesis stream.

    (df.selectExpr("key AS partitionKey", "to_json(struct(*)) AS data")
       .write.format("kinesis_spout").option("streamName", "enriched").mode("append").save())

``mode("append")`` is required: Spark refuses its default mode (ErrorIfExists) for Python data sources, and a
Kinesis stream cannot be overwritten.

The data source registered for reads (:class:`~kinesis_spout.spark.source.KinesisSpoutDataSource`) makes these
writers. Modules: :mod:`~kinesis_spout.spark.sink.options` (the options), :mod:`~kinesis_spout.spark.sink.columns`
(the columns written), :mod:`~kinesis_spout.spark.sink.task` (one task's rows into Kinesis),
:mod:`~kinesis_spout.spark.sink.batches` (an Arrow batch checked column by column),
:mod:`~kinesis_spout.spark.sink.maps` (the shard maps a process's tasks share),
:mod:`~kinesis_spout.spark.sink.writers` (the Spark writers).
"""

from kinesis_spout.spark.sink.options import SinkOptions, parse_sink_options
from kinesis_spout.spark.sink.task import SinkCounts
from kinesis_spout.spark.sink.writers import KinesisSinkStreamWriter, KinesisSinkWriter, SinkCommit, make_writer

__all__ = ["KinesisSinkStreamWriter", "KinesisSinkWriter", "SinkCommit", "SinkCounts", "SinkOptions", "make_writer",
           "parse_sink_options"]
