"""The batch reader (``spark.read.format("kinesis_spout")``), under its former module name: it lives in
:mod:`kinesis_spout.spark.source` now (:mod:`~kinesis_spout.spark.source.batch`)."""

from __future__ import annotations

from kinesis_spout.spark.source import BATCH_OPTIONS, KinesisBatchReader, parse_batch_options

__all__ = ["BATCH_OPTIONS", "KinesisBatchReader", "parse_batch_options"]
