"""A rule of the house, read from the files (no server): a checkpoint store's capabilities are declared by the store.

Outside :mod:`kinesis_spout.checkpoint`, no code asks ``isinstance(..., ZooKeeperCheckpointStore)``: what a caller
needs from a store in ZooKeeper (its session, its nodes, its fences) it asks through
:func:`kinesis_spout.checkpoint.base.zookeeper_home`, so a user's store that declares a ``zookeeper_home`` gets the
same. A test is seen whatever its spelling: the bare name, an attribute of a module, a name imported under another,
or one class of a tuple.

Who calls: pytest (``tests/unit/tooling``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OWNER = "kinesis_spout/checkpoint/"
NAME = "ZooKeeperCheckpointStore"


def _names(node: ast.expr) -> list[ast.expr]:
    """The classes an ``isinstance`` second argument names (the elements of a tuple, else itself)."""
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def _is_store_class(node: ast.expr, aliases: set[str]) -> bool:
    return ((isinstance(node, ast.Name) and (node.id == NAME or node.id in aliases))
            or (isinstance(node, ast.Attribute) and node.attr == NAME))


def store_type_tests(root: Path) -> list[str]:
    """Each ``isinstance(x, ZooKeeperCheckpointStore)`` in ``root/kinesis_spout`` outside ``checkpoint/``, as
    ``"path:line"``."""
    found: list[str] = []
    for path in sorted((root / "kinesis_spout").rglob("*.py")):
        where = path.relative_to(root).as_posix()
        if where.startswith(OWNER):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), where)
        aliases = {alias.asname for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                   for alias in node.names if alias.name == NAME and alias.asname}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                    and len(node.args) == 2 and any(_is_store_class(n, aliases) for n in _names(node.args[1]))):
                found.append(f"{where}:{node.lineno}")
    return found


def test_no_code_outside_the_checkpoint_package_tests_for_the_zookeeper_store() -> None:
    assert store_type_tests(ROOT) == [], (
        f"ask the store what it can do (kinesis_spout.checkpoint.base.zookeeper_home(store)) instead of testing for "
        f"ZooKeeperCheckpointStore, so a user's store declaring a zookeeper_home gets the same: "
        f"{store_type_tests(ROOT)}")


def test_every_spelling_of_the_test_is_found_and_the_checkpoint_package_is_not(tmp_path: Path) -> None:
    lib = tmp_path / "kinesis_spout"
    (lib / "checkpoint").mkdir(parents=True)
    (lib / "checkpoint" / "zookeeper.py").write_text("ok = isinstance(s, ZooKeeperCheckpointStore)\n",
                                                     encoding="utf-8")
    (lib / "reads.py").write_text(
        "from kinesis_spout.checkpoint import zookeeper\n"
        "from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore as Zk\n"
        "a = isinstance(s, ZooKeeperCheckpointStore)\n"
        "b = isinstance(s, zookeeper.ZooKeeperCheckpointStore)\n"
        "c = isinstance(s, (MemoryCheckpointStore, Zk))\n"
        "d = isinstance(s, MemoryCheckpointStore)\n"
        "e = ZooKeeperCheckpointStore.from_config(c)\n", encoding="utf-8")
    assert store_type_tests(tmp_path) == ["kinesis_spout/reads.py:3", "kinesis_spout/reads.py:4",
                                          "kinesis_spout/reads.py:5"]
