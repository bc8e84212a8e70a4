"""The consumer processes of the soak, each run as ``python -m benchmarks.soak.children.<name>`` and killed at
random moments. Each writes the message id of every record it delivers to an append-only file, fsynced before the
record is acked (:func:`benchmarks.soak.ledger.append_ids`), and ends cleanly on SIGTERM."""
