"""The pytest plugin (``kinesis_spout.testing.plugin``, loaded by every pytest run in a venv where kinesis_spout is
installed) loads none of the library: its fixtures load the servers' code when a test asks for one.

A user's ``pytest`` in that venv, for tests that never touch Kinesis, must not pay for the spout, boto3 and the
ZooKeeper client at start-up. ``kinesis_spout.testing``'s public names still import from the package.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import kinesis_spout.testing

ROOT = Path(__file__).resolve().parents[3]

#: Modules that loading the plugin must not load (together they cost over a second of every pytest start)
HEAVY = ("kinesis_spout.spout", "kinesis_spout.checkpoint", "kinesis_spout.kinesis", "kinesis_spout.config",
         "kinesis_spout.deadletters", "botocore", "boto3", "kazoo", "pyspark")


def _modules_after(code: str) -> list[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_loading_the_pytest_plugin_loads_none_of_the_library_s_heavy_modules() -> None:
    loaded = _modules_after("import pytest, kinesis_spout.testing.plugin")
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == [], f"the pytest plugin loaded {heavy}"


@pytest.mark.parametrize("name", kinesis_spout.testing.__all__)
def test_every_public_name_of_the_testing_package_imports_and_is_listed(name: str) -> None:
    value = getattr(importlib.import_module("kinesis_spout.testing"), name)
    exec(f"from kinesis_spout.testing import {name} as imported", namespace := {})  # noqa: S102
    assert namespace["imported"] is value
    assert name in dir(kinesis_spout.testing)


def test_a_name_the_testing_package_does_not_have_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'kinesis_spout.testing' has no attribute 'kill_att'"):
        kinesis_spout.testing.kill_att  # noqa: B018
