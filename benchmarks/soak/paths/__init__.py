"""The soak paths, one module each; :data:`PATHS` names them in the order they run."""

from __future__ import annotations

from typing import Callable

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.paths import exactly_once, leases, leases_network, pipeline, readstream, spout
from benchmarks.soak.report import PathResult

#: path name -> its run(ctx) function, in the order ``make soak`` runs them
PATHS: dict[str, Callable[[PathContext], PathResult]] = {
    "spout": spout.run,
    "leases": leases.run,
    "leases-network": leases_network.run,
    "pipeline": pipeline.run,
    "exactly-once": exactly_once.run,
    "readstream-driver": readstream.run_driver,
    "readstream-executors": readstream.run_executors,
}
