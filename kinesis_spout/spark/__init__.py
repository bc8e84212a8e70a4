"""Spark adapters: the micro-batch pipeline with per-record ack/fail, and the Structured Streaming source.

pyspark is imported only by these modules; the rest of kinesis_spout does not need it.
"""
