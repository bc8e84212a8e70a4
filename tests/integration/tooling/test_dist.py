"""``make dist`` builds the wheel a user installs until a release is published (README "Install"): the package
with its typed marker, the emulators' launcher scripts, the ``kinesis-spout`` command and the pytest plugin."""

from __future__ import annotations

import configparser
import subprocess
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_make_dist_builds_an_installable_wheel_of_the_checkout(tmp_path: Path) -> None:
    done = subprocess.run(["make", "--no-print-directory", "dist", f"DIST_DIR={tmp_path}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    wheels = sorted(tmp_path.glob("kinesis_spout-*-py3-none-any.whl"))
    assert len(wheels) == 1, sorted(p.name for p in tmp_path.iterdir())
    assert wheels[0].name in done.stdout  # the recipe names what it built
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        assert {"kinesis_spout/__init__.py", "kinesis_spout/py.typed", "kinesis_spout/testing/plugin.py"} <= names
        assert any(n.startswith("kinesis_spout/testing/") and n.endswith(".js") for n in names)
        assert not any(n.startswith(("tests/", "benchmarks/", "examples/")) for n in names)
        info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        points = configparser.ConfigParser()
        points.read_string(wheel.read(info).decode())
        meta = wheel.read(info.replace("entry_points.txt", "METADATA")).decode()
    assert points["console_scripts"]["kinesis-spout"] == "kinesis_spout.cli:main"
    assert points["pytest11"]["kinesis_spout"] == "kinesis_spout.testing.plugin"
    assert "Provides-Extra: demo" in meta and "Provides-Extra: state" in meta
