"""A rule of the house, read from the files (no server): the library reads its settings by group.

Each part of the library takes the settings group it needs (``ReadingSettings``, ``TrackingSettings``...) or reads
one off a config (``config.reading.max_records_per_call``); no module reads a setting by its flat name off a whole
config (``config.max_records_per_call``, ``self.config.worker_id``), except ``kinesis_spout/config/`` (which makes
the flat names), the spout's assembly (:mod:`kinesis_spout.spout.opening`, which hands the groups out) and the
short allow-list below, each entry with its reason. What counts as a read off a whole config is the rule of
``scripts/config_reads.py`` (the expression's last name is ``config``, ``cfg`` or ends in ``_config``), which also
counts the reads for a report.

Who calls: pytest (``tests/unit/tooling``).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .library_source import write_library
from .script_modules import load_script

ROOT = Path(__file__).resolve().parents[3]
#: The spout's assembly: builds the parts from a whole config and hands each its groups.
ASSEMBLY = frozenset({"kinesis_spout/spout/opening.py"})
#: Modules still allowed flat reads, and why. Keep it short: a module leaves the list when its reads go by group.
ALLOWED: dict[str, str] = {}


@pytest.fixture(scope="module")
def reads() -> ModuleType:
    return load_script("config_reads")


@pytest.fixture(scope="module")
def library(reads: ModuleType) -> list[Any]:
    """The reads of the library's modules (read once for the module's tests)."""
    return list(reads.library_reads(ROOT))


def outside(library: list[Any]) -> list[str]:
    """``"path:line: expression"`` of each flat read off a whole config outside the assembly and the allow-list."""
    return [f"{r.path}:{line}: {text}" for r in library if r.path not in ASSEMBLY | set(ALLOWED)
            for line, text in r.flat]


def test_the_library_reads_its_settings_by_group(library: list[Any]) -> None:
    assert outside(library) == [], (
        "read a setting off its group (config.reading.prefetch_records, or take the ReadingSettings), not by its "
        "flat name off a whole config; the flat names are the user's spelling (see kinesis_spout/config/names.py)")


def test_every_module_of_the_allow_list_still_reads_a_flat_name(library: list[Any]) -> None:
    still = {r.path for r in library if r.flat}
    assert sorted(set(ALLOWED) - still) == [], "these read by group now: take them off ALLOWED"


def test_every_spelling_of_a_flat_read_is_found_and_group_reads_are_not(reads: ModuleType, tmp_path: Path) -> None:
    write_library(tmp_path, {
        "config/own.py": "x = config.retry_limit\n",
        "part.py": "def f(config, cfg, self, args, reading, spout_config):\n"
                   "    a = config.retry_limit\n"
                   "    b = cfg.reading.scheme\n"
                   "    c = self.config.worker_id\n"
                   "    d = self.emitter.config.reliable\n"
                   "    e = args.region\n"
                   "    f = reading.max_records_per_call\n"
                   "    g = spout_config.zookeeper\n"
                   "    h = self._config.tracking\n"})
    assert outside(reads.library_reads(tmp_path)) == [
        "kinesis_spout/part.py:2: config.retry_limit", "kinesis_spout/part.py:4: self.config.worker_id",
        "kinesis_spout/part.py:5: self.emitter.config.reliable", "kinesis_spout/part.py:8: spout_config.zookeeper"]
    part = reads.module_reads(tmp_path / "kinesis_spout" / "part.py", tmp_path)
    assert [text for _, text in part.groups] == ["cfg.reading", "self._config.tracking"]
