"""A rule of the house, read from the files (no server): kazoo is imported by ``kinesis_spout/zookeeper/`` alone.

The other packages catch the library's errors of :mod:`kinesis_spout.zookeeper.errors`, into which the session
translates kazoo's (``test_kazoo_errors.py``), so one package owns the dependency. ``kinesis_spout/testing/`` may
import kazoo too: its pytest plugin drives a raw client against the test server. Every spelling is seen: ``import
kazoo``, ``import kazoo.x as y``, ``from kazoo.x import y``, at the top of a module, inside a function or under ``if
TYPE_CHECKING:``.

Who calls: pytest (``tests/unit/tooling``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from .library_source import library_modules, places, write_library

ROOT = Path(__file__).resolve().parents[3]
OWNERS = ("kinesis_spout/zookeeper/", "kinesis_spout/testing/")


def _is_kazoo(module: str | None) -> bool:
    return module is not None and (module == "kazoo" or module.startswith("kazoo."))


def kazoo_imports(root: Path) -> list[str]:
    """Each import of kazoo in ``root/kinesis_spout`` outside the owners, as ``"path:line: module"``."""
    found: list[tuple[str, int, str]] = []
    for where, tree in library_modules(root, skip=OWNERS):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_kazoo(node.module):
                found.append((where, node.lineno, node.module or ""))
            elif isinstance(node, ast.Import):
                found.extend((where, node.lineno, a.name) for a in node.names if _is_kazoo(a.name))
    return places(found)


def test_kazoo_is_imported_by_the_zookeeper_package_alone() -> None:
    assert kazoo_imports(ROOT) == [], (
        f"catch the errors of kinesis_spout.zookeeper.errors (add one there if it is missing), and call ZooKeeper "
        f"through kinesis_spout.zookeeper, not kazoo: {kazoo_imports(ROOT)}")


def test_every_spelling_of_a_kazoo_import_is_found_and_the_owners_are_not(tmp_path: Path) -> None:
    write_library(tmp_path, {
        **{f"{owner}/client.py": "from kazoo.client import KazooClient\n" for owner in ("zookeeper", "testing")},
        "reads.py": "import kazoo\n"
                    "import json, kazoo.retry as r\n"
                    "def f():\n"
                    "    from kazoo.exceptions import NoNodeError\n"
                    "from kinesis_spout.zookeeper.errors import NoNodeError\n"
                    "import kazoolike\n"
                    "from . import kazoo\n"})
    assert kazoo_imports(tmp_path) == ["kinesis_spout/reads.py:1: kazoo", "kinesis_spout/reads.py:2: kazoo.retry",
                                       "kinesis_spout/reads.py:4: kazoo.exceptions"]
