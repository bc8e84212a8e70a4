"""The names of the options of a batch read (``spark.read.format("kinesis_spout")``), which a stream read refuses.

Pure: no Spark, no I/O. :mod:`kinesis_spout.spark.offsets` accepts them as known options of the data source;
:mod:`kinesis_spout.spark.source.batch` parses their values.
"""

from __future__ import annotations

__all__ = ["BATCH_OPTIONS", "ENDING_TIMESTAMP", "STARTING_TIMESTAMP"]

STARTING_TIMESTAMP = "startingTimestamp"
ENDING_TIMESTAMP = "endingTimestamp"
#: Options of batch reads only (``readStream`` refuses them as unknown options).
BATCH_OPTIONS = (STARTING_TIMESTAMP, ENDING_TIMESTAMP)
