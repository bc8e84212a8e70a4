"""I/O with Kinesis through boto3: clients, shard listing, the shard getter and the buffered readers."""
