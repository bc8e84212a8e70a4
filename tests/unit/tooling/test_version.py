"""The version is written once, in pyproject.toml; kinesis_spout.__version__ reads it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import kinesis_spout

ROOT = Path(__file__).resolve().parents[3]


def pyproject_version() -> str:
    match = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert match, "pyproject.toml has no version line"
    return match.group(1)


def test_the_package_version_is_pyproject_s() -> None:
    assert kinesis_spout.__version__ == pyproject_version()


def test_a_source_tree_that_was_never_installed_reads_its_pyproject(tmp_path: Path) -> None:
    """Without the distribution's metadata (a checkout on PYTHONPATH, never pip-installed), the fallback reads the
    checkout's pyproject.toml."""
    code = ("import importlib.metadata as m\n"
            "def missing(name):\n"
            "    raise m.PackageNotFoundError(name)\n"
            "m.version = missing\n"
            "import kinesis_spout\n"
            "print(kinesis_spout.__version__)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == pyproject_version()
