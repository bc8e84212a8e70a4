"""The benchmarks the runner knows, in the order they run, and the contract a benchmark module fulfils.

A benchmark module exposes:

- ``TITLE: str`` - the heading of its section in ``latest.md``; its docstring explains what the numbers mean and
  is printed under the heading;
- ``run(ctx: BenchContext, smoke: bool) -> list[dict]`` - measures and returns rows. Each row has a ``case`` and
  the figures it measured, each figure made by :func:`benchmarks.stats.summary` (median, min, max, runs) or a
  plain number; rows also say what they were measured on (emulator, shards, records, record_bytes, repeats).
  ``smoke`` asks for tiny sizes (the test suite); ``ctx.quick`` for the shorter sizes of ``--quick``;
- optionally ``COLUMNS`` - ``(row key, column header, format)`` for its table, the format being
  ``fig0``/``fig1``/``fig2`` (a figure with 0, 1 or 2 decimals and its min-max), ``x`` (a ratio) or a
  ``str.format`` pattern;
- optionally ``headline(rows) -> list[dict]`` - lines of the summary table: ``figure``, ``value``, ``goal``,
  ``met`` (True, False or None when there is no goal);
- optionally ``plot(ax, rows)`` - draws one panel of the chart on a matplotlib ``Axes``.

A listed module that does not exist yet is reported as "not implemented yet": that is the place where the Spark
benchmark (``benchmarks/bench_spark.py``) plugs in.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark: its short name (``--only``, keys of ``latest.json``) and its module."""

    name: str
    module: str

    def load(self) -> ModuleType | None:
        """The module, or None when it does not exist (yet). An import error inside an existing module raises."""
        try:
            return importlib.import_module(self.module)
        except ModuleNotFoundError as exc:
            if exc.name == self.module:
                return None
            raise


BENCHMARKS: tuple[BenchmarkSpec, ...] = (
    BenchmarkSpec("tracker", "benchmarks.bench_tracker"),
    BenchmarkSpec("read", "benchmarks.bench_read"),
    BenchmarkSpec("peers", "benchmarks.bench_peers"),
    BenchmarkSpec("checkpoint", "benchmarks.bench_checkpoint"),
    BenchmarkSpec("spark", "benchmarks.bench_spark"),
    BenchmarkSpec("scaling", "benchmarks.bench_scaling"),
    BenchmarkSpec("shards", "benchmarks.bench_shards"),
    BenchmarkSpec("leases", "benchmarks.bench_leases"),
    BenchmarkSpec("kpl", "benchmarks.bench_kpl"),
    BenchmarkSpec("state", "benchmarks.bench_state"),
    BenchmarkSpec("sink", "benchmarks.bench_sink"),
    BenchmarkSpec("fanout", "benchmarks.bench_fanout"),
)

NAMES = tuple(spec.name for spec in BENCHMARKS)


def select(names: list[str] | None) -> list[BenchmarkSpec]:
    """The specs named (all when ``names`` is empty), in registry order; unknown names raise ``ValueError``."""
    if not names:
        return list(BENCHMARKS)
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        raise ValueError(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(NAMES)}")
    return [spec for spec in BENCHMARKS if spec.name in names]
