"""``make demo`` installs the package and its ``demo`` extra only (scripts/setup.sh demo): the demo's code must not
import the test or contributor's tools (pytest, hypothesis, mypy, mkdocs, selenium...), which a fresh clone's demo
venv does not have. Checked by running the demo's imports and its ``--help`` in an interpreter that refuses them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

#: Top-level modules of the test and dev extras (pyproject.toml), absent from a demo-only venv
NOT_IN_THE_DEMO = ("pytest", "_pytest", "xdist", "hypothesis", "aws_kinesis_agg", "prometheus_client", "mypy",
                   "ruff", "importlinter", "mkdocs", "mkdocstrings", "selenium")

#: The modules examples/wordcount.py --demo imports, with every engine and --exactly-once
DEMO_MODULES = ("kinesis_spout.demo", "kinesis_spout.testing.spark", "kinesis_spout.testing.moto_server",
                "kinesis_spout.testing.zookeeper", "kinesis_spout.testing.redis", "kinesis_spout.testing.memcached",
                "kinesis_spout.spark", "kinesis_spout.state.redis", "kinesis_spout.state.memcached")


def test_the_demo_imports_nothing_of_the_test_and_dev_extras() -> None:
    probe = (f"import sys, runpy\n"
             f"for name in {NOT_IN_THE_DEMO!r}:\n"
             f"    sys.modules[name] = None  # import raises ModuleNotFoundError, as in a demo-only venv\n"
             f"for module in {DEMO_MODULES!r}:\n"
             f"    __import__(module)\n"
             f"sys.argv = ['wordcount.py', '--help']\n"
             f"runpy.run_path('examples/wordcount.py', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "--demo" in done.stdout, done.stderr[-2000:]
