"""What the Spark adapters share: the columns of a batch of records and their Arrow form (:mod:`~.schema`, built the
same way by the pipeline and the source), and a Spark Python process's Kinesis and ZooKeeper clients
(:mod:`~.clients`, taken by the source's reads and the sink's writes).

No pyspark. The package imports none of its modules, so importing one loads only what that one needs.
"""
