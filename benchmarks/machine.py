"""What the figures were measured on: the machine and the versions of everything that takes part."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: Python distributions whose versions the results record (those not installed are left out).
DISTRIBUTIONS = ("kinesis-spout", "boto3", "botocore", "kazoo", "moto", "async-kinesis", "aiobotocore",
                 "matplotlib", "pyspark")


def _first_line_with(path: str, prefix: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def describe_machine() -> dict[str, Any]:
    """Cores (all, and usable by this process), CPU model, memory, OS and the Python implementation."""
    mem_kb = _first_line_with("/proc/meminfo", "MemTotal")
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 0
    return {
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "cpu": _first_line_with("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "memory_gib": round(int(mem_kb.split()[0]) / 2**20, 1) if mem_kb else None,
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }


def relative_paths(text: str) -> str:
    """``text`` (a profile's listing) with the checkout's and the interpreter's package directories left out of its
    file names, so that a report says ``kinesis_spout/spout/columns.py``, not where this checkout happens to be."""
    for prefix in (sysconfig.get_paths()["purelib"], str(ROOT)):
        text = text.replace(prefix.rstrip("/") + "/", "")
    return text


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages: on a shared machine they show whether others were busy."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _node_package_version(package: str) -> str | None:
    from kinesis_spout.testing.emulators import default_node_modules

    try:
        return str(json.loads((default_node_modules() / package / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _command_version(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


def versions(zookeeper: str | None = None) -> dict[str, str]:
    """Versions of the Python packages, the emulators, node and ZooKeeper (when known)."""
    found: dict[str, str] = {"python": platform.python_version()}
    for dist in DISTRIBUTIONS:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    for package in ("kinesalite",):
        version = _node_package_version(package)
        if version:
            found[package] = version
    node = _command_version(["node", "--version"])
    if node:
        found["node"] = node.lstrip("v")
    if zookeeper:
        found["zookeeper"] = zookeeper
    return found
