"""kinesis_spout: read Amazon Kinesis into Apache Spark from Python."""

__version__ = "0.1.0"
