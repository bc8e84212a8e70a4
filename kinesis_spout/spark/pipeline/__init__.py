"""The micro-batch pipeline: Kinesis records as Spark DataFrames with per-record ack/fail, or exactly once.

Modules: :mod:`~.facade` (:class:`SpoutPipeline`, its settings checks, stop and signals), :mod:`~.at_least_once`
and :mod:`~.exactly_once` (the two runners), :mod:`~.batch_log` (the exactly-once runner's ownership and replays),
:mod:`~.loop` (what both runners share: when a run is finished, pacing, taking a batch, figures),
:mod:`~.batch` (what ``process(df, batch)`` is given and how its answer is read), :mod:`~.metrics` (the figures of
a run) and :mod:`~.settings`.
"""

from __future__ import annotations

from kinesis_spout.spark.bookkeeping.ownership import OwnershipTaken
from kinesis_spout.spark.pipeline.batch_log import previous_owner_wait_s
from kinesis_spout.spark.pipeline.exactly_once import TransactionalBatch
from kinesis_spout.spark.pipeline.facade import SpoutPipeline
from kinesis_spout.spark.pipeline.settings import ProcessFunction
from kinesis_spout.state.txlog import OwnershipLost

__all__ = ["OwnershipLost", "OwnershipTaken", "ProcessFunction", "SpoutPipeline", "TransactionalBatch",
           "previous_owner_wait_s"]
