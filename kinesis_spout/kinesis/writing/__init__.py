"""Writing records: the putter (PutRecords with retries), routing by hash key, KPL aggregation of puts, the lean
PutRecords path and the limits Kinesis sets on what is put."""
