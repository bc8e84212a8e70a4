"""The chaos soak (``make soak``): crashes and faults at random moments under a live producer, and nothing lost.

Each path (:mod:`benchmarks.soak.paths`) runs one kind of consumer on a multi-shard kinesalite stream that a
producer keeps writing to, through a :class:`~kinesis_spout.testing.faults.FaultProxy` (throttling bursts), with a
private ZooKeeper (restarted) and Redis. A seeded fault schedule SIGKILLs the consumer, restarts ZooKeeper, pauses
the consumer past its ZooKeeper session (SIGSTOP, then SIGCONT) and throttles reads; then the producer stops, the
consumer drains the stream and the path reports what was produced, delivered, lost and duplicated, whether the
stored checkpoints ever moved backwards, the longest stall and the faults done by kind.

Modules: :mod:`~.runner` (command line, one path after another, the exit code), :mod:`~.environment` (the servers),
:mod:`~.producer`, :mod:`~.ledger` (delivered ids, progress and stalls), :mod:`~.faults` (the seeded schedule and the
fault actions), :mod:`~.checkpoints` (per-shard monotonicity), :mod:`~.cycle` (the kill cycle every path shares),
:mod:`~.report` (``benchmarks/results/soak.md`` and ``soak.json``); :mod:`~.children` holds the consumer processes.
"""
