"""``import kinesis_spout`` loads none of the library: each public name is loaded from its module on first use.

Spark starts fresh Python processes that unpickle the data source (``kinesis_spout.spark.source...``), which imports
the package first; they must not pay for the spout, the ZooKeeper client, boto3 and the rest they do not use. Every
public name must still be importable from the top, be the library's own object, and be listed by ``dir()``.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import kinesis_spout

ROOT = Path(__file__).resolve().parents[3]

#: Modules a bare ``import kinesis_spout`` must not load (each costs tens to hundreds of milliseconds)
HEAVY = ("kinesis_spout.spout", "kinesis_spout.checkpoint", "kinesis_spout.config", "kinesis_spout.kinesis",
         "kinesis_spout.deadletters", "kinesis_spout.metrics", "kinesis_spout.tracker", "botocore", "boto3", "kazoo",
         "importlib.metadata")


def _modules_after(code: str) -> list[str]:
    """The modules loaded by a fresh interpreter (run from the checkout) after it runs ``code``."""
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_the_package_loads_none_of_the_library_s_heavy_modules() -> None:
    loaded = _modules_after("import kinesis_spout")
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == [], f"import kinesis_spout loaded {heavy}"


def test_a_public_name_loads_its_module_and_only_what_that_module_needs() -> None:
    loaded = _modules_after("from kinesis_spout import SpoutConfig")
    assert "kinesis_spout.config" in loaded
    assert "kinesis_spout.spout" not in loaded and "kazoo" not in loaded


@pytest.mark.parametrize("name", kinesis_spout.__all__)
def test_every_public_name_imports_from_the_top_and_is_the_library_s_own_object(name: str) -> None:
    value = getattr(importlib.import_module("kinesis_spout"), name)
    exec(f"from kinesis_spout import {name} as imported", namespace := {})  # noqa: S102 - the statement users write
    assert namespace["imported"] is value
    assert name in dir(kinesis_spout)
    if name != "__version__":
        assert value.__module__.startswith("kinesis_spout."), (name, value.__module__)


def test_the_version_is_read_on_first_use_and_stays_the_same() -> None:
    assert kinesis_spout.__version__ == kinesis_spout.__version__ != "0+unknown"


def test_a_name_the_package_does_not_have_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'kinesis_spout' has no attribute 'KinesisSpoot'"):
        kinesis_spout.KinesisSpoot  # noqa: B018
    with pytest.raises(ImportError, match="KinesisSpoot"):
        exec("from kinesis_spout import KinesisSpoot", {})  # noqa: S102
