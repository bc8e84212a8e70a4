"""What Spark's side keeps in ZooKeeper next to the app's checkpoints of a stream, or in memory beside a memory
checkpoint store: batch ids and the ends executor reads record (:mod:`~.batch_store`, its memory form
:mod:`~.batch_store_memory`), and the one exactly-once pipeline's ownership (:mod:`~.ownership`).

Who uses it: the pipeline (batch ids, ownership), the source's executor reads (batch ends, heartbeats) and the
``kinesis-spout checkpoints`` command (the last batch id). No pyspark: these modules run where Spark is not
installed. The package imports none of its modules, so importing one loads only what that one needs.
"""
