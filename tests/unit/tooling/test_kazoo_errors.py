"""A rule of the house, read from the files (no server): kazoo's errors stop at ``kinesis_spout/zookeeper/``.

The session translates them into the library's own (:mod:`kinesis_spout.zookeeper.errors`), so no module outside
``zookeeper/`` and ``testing/`` names a kazoo error class: none imports one (from kazoo or from a library module
that hands one on, such as the session's translations), none names one kazoo has and the library does not
(``ConnectionLoss``, ``KazooTimeoutError``, ...), and ``zookeeper/errors.py`` itself holds the library's classes, not
kazoo's. (Importing kazoo itself outside ``zookeeper/`` is ``test_kazoo_imports.py``'s rule.)

Who calls: pytest (``tests/unit/tooling``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import kazoo.exceptions
from kazoo.handlers.threading import KazooTimeoutError

from kinesis_spout.zookeeper import errors

from .library_source import library_modules, places, write_library

ROOT = Path(__file__).resolve().parents[3]
OWNERS = ("kinesis_spout/zookeeper/", "kinesis_spout/testing/")
KAZOO_ERRORS = (kazoo.exceptions.KazooException, KazooTimeoutError)
#: The names of kazoo's error classes the library has no class of its own for.
KAZOO_ONLY = frozenset(
    name for name, value in [*vars(kazoo.exceptions).items(), ("KazooTimeoutError", KazooTimeoutError)]
    if inspect.isclass(value) and issubclass(value, KAZOO_ERRORS)) - set(errors.__all__)


def _is_kazoo_error(value: object) -> bool:
    return inspect.isclass(value) and issubclass(value, KAZOO_ERRORS)


def kazoo_error_uses(root: Path) -> list[str]:
    """Each use of a kazoo error class in ``root/kinesis_spout`` outside the owners, as ``"path:line: what"``: a name
    imported from a ``kinesis_spout.zookeeper`` module that is (or derives from) a kazoo error class, and a name or
    attribute spelled like a kazoo error class the library has none of."""
    found: list[tuple[str, int, str]] = []
    for where, tree in library_modules(root, skip=OWNERS):
        for node in ast.walk(tree):
            if (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None
                    and node.module.startswith("kinesis_spout.zookeeper")):
                module = importlib.import_module(node.module)
                found.extend((where, node.lineno, f"{node.module}.{alias.name} is kazoo's")
                             for alias in node.names if _is_kazoo_error(getattr(module, alias.name, None)))
            elif isinstance(node, ast.Name) and node.id in KAZOO_ONLY:
                found.append((where, node.lineno, node.id))
            elif isinstance(node, ast.Attribute) and node.attr in KAZOO_ONLY:
                found.append((where, node.lineno, node.attr))
    return places(found)


def test_no_module_outside_the_zookeeper_package_uses_a_kazoo_error() -> None:
    assert kazoo_error_uses(ROOT) == [], (
        f"catch the library's errors of kinesis_spout.zookeeper.errors (the session translates kazoo's; add one "
        f"there and to the translation if it is missing), not kazoo's: {kazoo_error_uses(ROOT)}")


def test_the_zookeeper_errors_module_holds_the_library_s_classes_and_imports_no_kazoo() -> None:
    source = (ROOT / "kinesis_spout/zookeeper/errors.py").read_text(encoding="utf-8")
    imported = [n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)]
    assert [m for m in imported if m and m.startswith("kazoo")] == []
    for name in errors.__all__:
        value = getattr(errors, name)
        assert not _is_kazoo_error(value) and issubclass(value, errors.SpoutError), name


def test_every_spelling_of_a_kazoo_error_is_found_and_the_owners_are_not(tmp_path: Path) -> None:
    write_library(tmp_path, {
        "zookeeper/session.py": "except ConnectionLoss:\n    pass\n",
        "reads.py": "from kinesis_spout.zookeeper.errors import NoNodeError, NoAnswerError\n"
                    "from kinesis_spout.zookeeper.translation import NoNodeError as N, translated\n"
                    "from kinesis_spout.zookeeper import errors\n"
                    "def f(session):\n"
                    "    try:\n"
                    "        session.delete_once('/a', 1)\n"
                    "    except (errors.SessionExpiredError, KazooTimeoutError, NoNodeError):\n"
                    "        pass\n"})
    assert kazoo_error_uses(tmp_path) == [
        "kinesis_spout/reads.py:2: kinesis_spout.zookeeper.translation.NoNodeError is kazoo's",
        "kinesis_spout/reads.py:7: KazooTimeoutError", "kinesis_spout/reads.py:7: SessionExpiredError"]
