"""What the house-rule tests of this folder share when they read the library's files: each module of
``kinesis_spout`` parsed, the places they find in the form they report, and a small library written for a test.

Who calls: the test modules of ``tests/unit/tooling`` that check a rule by reading the code (kazoo's imports and
errors, logger names, getter construction, settings reads). Only :func:`write_library` writes, under the root given.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path


def library_modules(root: Path, skip: tuple[str, ...] = ()) -> Iterator[tuple[str, ast.Module]]:
    """Each module of ``root/kinesis_spout``, in path order, as (its path from ``root``, its parsed tree), but for
    the paths that start with one of ``skip`` (a package ``"kinesis_spout/zookeeper/"`` or a module's path)."""
    for path in sorted((root / "kinesis_spout").rglob("*.py")):
        where = path.relative_to(root).as_posix()
        if not where.startswith(skip):
            yield where, ast.parse(path.read_text(encoding="utf-8"), where)


def places(found: Iterable[tuple[str, int, str]]) -> list[str]:
    """``found`` (path, line, what) sorted, as the ``"path:line: what"`` a rule's failure lists."""
    return [f"{where}:{line}: {what}" for where, line, what in sorted(found)]


def write_library(root: Path, files: dict[str, str]) -> Path:
    """Write each of ``files`` (its path under ``root/kinesis_spout``: its text), its folders made; returns ``root``."""
    for name, text in files.items():
        path = root / "kinesis_spout" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
