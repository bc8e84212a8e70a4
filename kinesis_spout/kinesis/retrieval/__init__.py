"""Reading shards: polling (GetRecords) and enhanced fan-out (SubscribeToShard) getters behind one protocol, the
factory that chooses between them, and the buffered readers and their pool."""
