"""The soak paths, one module each; :data:`PATHS` names them in the order they run."""

from __future__ import annotations

from typing import Callable

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.paths import (
    exactly_once,
    leases,
    leases_network,
    pipeline,
    pipeline_network,
    readstream,
    readstream_network,
    spout,
    spout_network,
)
from benchmarks.soak.report import PathResult

#: path name -> its run(ctx) function, in the order ``make soak`` runs them
PATHS: dict[str, Callable[[PathContext], PathResult]] = {
    "spout": spout.run,
    "spout-network": spout_network.run,
    "leases": leases.run,
    "leases-network": leases_network.run,
    "pipeline": pipeline.run,
    "pipeline-network": pipeline_network.run_pipeline,
    "exactly-once": exactly_once.run,
    "exactly-once-network": pipeline_network.run_exactly_once,
    "readstream-driver": readstream.run_driver,
    "readstream-driver-network": pipeline_network.run_readstream_driver,
    "readstream-executors": readstream.run_executors,
    "readstream-executors-network": readstream_network.run,
}
