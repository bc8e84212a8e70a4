"""The parts of the library that are not Spark's run without loading pyspark (it costs seconds, and a CLI or ZooKeeper
host may not have it): the ``kinesis-spout`` commands other than the demo, and the pure and ZooKeeper modules that
live under ``kinesis_spout.spark`` beside the data source (its options, offsets, planned batches, lag, the batch
store and ownership, the shared columns and clients).

``kinesis_spout.spark`` and ``kinesis_spout.spark.source`` load their public names on first use (PEP 562), so
importing one of their light modules does not import the data source. Checked in a fresh interpreter, which names
the first module that loaded pyspark.

Who calls: pytest (``tests/unit/core``).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
#: The CLI's modules that run Spark, with why: their imports are not checked
SPARK_COMMANDS = {"demo.py"}  # `kinesis-spout demo` runs the word count on a local Spark session
#: Modules under kinesis_spout.spark that must import no pyspark (pure logic, ZooKeeper stores, lazy packages)
LIGHT_SPARK_MODULES = (
    "kinesis_spout.spark",
    "kinesis_spout.spark.source",
    "kinesis_spout.spark.source.packing",
    "kinesis_spout.spark.source.shares",
    "kinesis_spout.spark.source.codec",
    "kinesis_spout.spark.source.clients",
    "kinesis_spout.spark.source.aliases",
    "kinesis_spout.spark.source.read_kinds",
    "kinesis_spout.spark.source.offsets",
    "kinesis_spout.spark.source.executor_batches",
    "kinesis_spout.spark.source.lag",
    "kinesis_spout.spark.bookkeeping.batch_store",
    "kinesis_spout.spark.bookkeeping.batch_store_memory",
    "kinesis_spout.spark.bookkeeping.ownership",
    "kinesis_spout.spark.shared.clients",
    "kinesis_spout.spark.shared.schema",
)


def first_pyspark_loader(modules: list[str]) -> str | None:
    """The first of ``modules`` whose import loads pyspark in a fresh interpreter (run from the checkout), imported
    in order, or None when none does."""
    probe = ("import importlib, sys, json\n"
             f"for name in {modules!r}:\n"
             "    importlib.import_module(name)\n"
             "    if any(m == 'pyspark' or m.startswith('pyspark.') for m in sys.modules):\n"
             "        print(json.dumps(name)); break\n"
             "else:\n"
             "    print(json.dumps(None))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found: str | None = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def cli_imports(root: Path = ROOT) -> list[str]:
    """Every ``kinesis_spout`` module the CLI's command modules import, at the top or inside a function (a command's
    own imports are made when it runs), the Spark commands' (:data:`SPARK_COMMANDS`) left out; sorted."""
    found: set[str] = {"kinesis_spout.cli"}
    for path in sorted((root / "kinesis_spout" / "cli").glob("*.py")):
        if path.name in SPARK_COMMANDS:
            continue
        if path.stem not in ("__init__", "__main__"):  # __main__ runs the command line: its imports are read
            found.add(f"kinesis_spout.cli.{path.stem}")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("kinesis_spout"))
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.update([node.module] if node.module.startswith("kinesis_spout") else [])
    return sorted(found)


def test_the_cli_s_commands_but_the_demo_load_no_pyspark() -> None:
    modules = cli_imports()
    assert "kinesis_spout.cli.checkpoints" in modules and len(modules) > 10
    assert first_pyspark_loader(modules) is None


def test_the_light_modules_under_kinesis_spout_spark_load_no_pyspark() -> None:
    assert first_pyspark_loader(list(LIGHT_SPARK_MODULES)) is None
