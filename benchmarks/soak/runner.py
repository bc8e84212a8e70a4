"""``python -m benchmarks.soak``: the chaos soak, path by path (``make soak SOAK_ARGS=...``).

    python -m benchmarks.soak [--paths spout,leases,...] [--kills N] [--seed S] [--quick] [--out FILE]

Each path gets its own seeded RNG (derived from ``--seed`` and the path's name, so a path replays the same faults
when run alone), its own stream, ZooKeeper prefix and consumers; the servers are shared. The seed is printed
first. Results go to ``benchmarks/results/soak.md`` and ``soak.json`` (``--out``). The exit code is 1 when a path
lost a record, stored an inexact count, moved a checkpoint backwards or had records still behind at the end of its
drain (reported apart from lost ones: a record is lost only when a stored checkpoint passed it), else 0.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
import time
import traceback
import zlib
from pathlib import Path

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.environment import CHECKOUT, SoakServers
from benchmarks.soak.paths import PATHS
from benchmarks.soak.report import PathResult, verdict, write

#: faults per path of a full soak (``make soak``) and of ``--quick``.
#: Sizing, from runs of 6 faults per path on 2 cores with a load average of 8 to 10 (a busy machine), the mean
#: seconds of a cycle (random moment + fault + recovery to the next delivery): spout SIGKILL 2.0, session expiry
#: 8.2, throttling burst 2-15 (the readers back off), ZooKeeper restart 4; lease worker SIGKILL 1.2, session expiry
#: 8.2; local Spark drivers (pipeline, exactly-once) SIGKILL 20, JVM SIGKILL 21, Python worker 1.7-3.3; readStream
#: driver SIGKILL 33 (readMode=driver) and 42 (executors, standalone cluster), executor JVM 1.5. With each path's
#: mix of faults that makes 50 faults about 3 (spout), 3 (leases), 7 (pipeline), 8 (exactly-once), 11
#: (readstream-driver) and 12 (readstream-executors) minutes with start-up and drain: about 45 minutes in all there,
#: less on a quiet machine, where Spark drivers start faster. Measured: 50 faults per path (34 to 37 of them kills)
#: took 25.7 minutes in all. The default is 72 faults, whose required shares make at least 50 of them kills of the
#: path's processes (SIGKILLs of consumers, workers, drivers, driver or executor JVMs, Python workers): measured
#: 22.0 minutes in all (2026-11-26, 58 to 67 kills per path, 11 driver kills on each Spark path). The network
#: paths do at least 50 network faults of 72 instead (measured 2026-11-29, seed 4343, load 5 to 20: leases-network
#: 9.5 minutes, spout-network 8.1, pipeline-network 11.3, exactly-once-network 14.6, readstream-executors-network
#: 21.8; readstream-driver-network 10.0 on a quiet machine).
DEFAULT_KILLS = 72
QUICK_KILLS = 3
DEFAULT_OUT = CHECKOUT / "benchmarks" / "results" / "soak.md"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--paths", default=",".join(PATHS),
                   help=f"comma-separated paths to run, in this order (default: all: {','.join(PATHS)})")
    p.add_argument("--kills", type=int, help=f"faults per path (default {DEFAULT_KILLS}, --quick {QUICK_KILLS})")
    p.add_argument("--seed", type=int, help="the seed of the fault schedule (default: random, printed)")
    p.add_argument("--quick", action="store_true", help=f"{QUICK_KILLS} faults per path, for development")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the Markdown report (JSON beside it)")
    p.add_argument("--drain-s", type=float, default=180.0, help="how long consumers get to catch up at the end")
    p.add_argument("-v", "--verbose", action="store_true", help="log every fault")
    args = p.parse_args(argv)
    unknown = [name for name in args.paths.split(",") if name not in PATHS]
    if unknown:
        p.error(f"--paths: unknown path(s) {unknown}; choose from {', '.join(PATHS)}")
    if args.kills is not None and args.kills < 1:
        p.error(f"--kills must be 1 or more, got {args.kills}")
    return args


def path_rng(seed: int, name: str) -> random.Random:
    """The RNG of one path: the same for a seed and a path whatever other paths run."""
    return random.Random(seed * 1_000_003 + zlib.crc32(name.encode()))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    for noisy in ("kazoo", "kinesis_spout.testing.faults"):  # connection losses and injected faults are the plan
        logging.getLogger(noisy).setLevel(logging.ERROR)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**9)
    kills = args.kills or (QUICK_KILLS if args.quick else DEFAULT_KILLS)
    print(f"soak: seed {seed} (replay with --seed {seed}), {kills} faults per path, paths {args.paths}", flush=True)
    began = time.monotonic()
    results: list[PathResult] = []
    with tempfile.TemporaryDirectory(prefix="kinesis-spout-soak-") as tmp, SoakServers() as servers:
        for name in args.paths.split(","):
            print(f"soak: {name} ...", flush=True)
            ctx = PathContext(servers, path_rng(seed, name), kills, Path(tmp), drain_s=args.drain_s)
            try:
                result = PATHS[name](ctx)
            except Exception:  # noqa: BLE001 - one path's failure is reported, and the other paths still run
                result = PathResult(name, error=traceback.format_exc(limit=8))
                print(f"soak: {name} could not run:\n{result.error}", flush=True)
            results.append(result)
            print(f"soak: {name}: {verdict(result)}; produced {result.produced}, delivered {result.delivered}, "
                  f"lost {result.lost} {result.lost_ids[:3]}, behind {result.behind}, "
                  f"duplicates {result.duplicates}, exact "
                  f"{result.exact}, checkpoints backwards {len(result.checkpoints_backwards)}, longest stall "
                  f"{result.longest_stall_s} s, faults {result.faults}, cycle s {result.mean_cycle_s}, "
                  f"wall {result.wall_s} s", flush=True)
            write(results, args.out, seed, argv, time.monotonic() - began)
    wall = time.monotonic() - began
    write(results, args.out, seed, argv, wall)
    failed = [r.path for r in results if not r.ok]
    print(f"soak: {'FAILED: ' + ', '.join(failed) if failed else 'ok'} in {wall / 60:.1f} min (seed {seed}); "
          f"report: {args.out}", flush=True)
    return 1 if failed else 0
