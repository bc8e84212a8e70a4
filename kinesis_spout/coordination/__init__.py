"""Who reads which shard, and from where: shard lineage (parents before children) shared by the spout and the
Spark source."""
