"""A rule of the house, read from the files (no server): a shard getter is made in one place.

The getter classes (``GETTER_CLASSES`` of :mod:`kinesis_spout.kinesis.retrieval.factory`: the polling and the
fan-out getter and the paced and waiting forms the Spark tasks read with) are constructed only by that factory
module, where the reading settings choose between them; and no class of the library derives from one (the
getters share code by composition, behind the protocol). A call is seen whatever its spelling: the bare name, an
attribute of a module (``polling.ShardGetter(...)``) or a name imported under another (``import ShardGetter as G``).

Who calls: pytest (``tests/unit/tooling``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from kinesis_spout.kinesis.retrieval.factory import GETTER_CLASSES

from .library_source import library_modules, places, write_library

ROOT = Path(__file__).resolve().parents[3]
FACTORY = "kinesis_spout/kinesis/retrieval/factory.py"
NAMES = frozenset(cls.__name__ for cls in GETTER_CLASSES)


def _getter_name(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The getter class ``node`` names (as a callee or a base class), or None."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id if node.id in NAMES else None)
    if isinstance(node, ast.Attribute) and node.attr in NAMES:
        return node.attr
    return None


def getter_constructions(root: Path) -> list[str]:
    """Each construction of a getter class, and each class deriving from one, in ``root/kinesis_spout`` outside the
    factory: ``"path:line: Name(...)"`` or ``"path:line: class C(Name)"``."""
    found: list[tuple[str, int, str]] = []
    for where, tree in library_modules(root, skip=(FACTORY,)):
        aliases = {alias.asname: alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                   for alias in node.names if alias.name in NAMES and alias.asname}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (name := _getter_name(node.func, aliases)) is not None:
                found.append((where, node.lineno, f"{name}(...)"))
            elif isinstance(node, ast.ClassDef):
                for base in node.bases:
                    if (name := _getter_name(base, aliases)) is not None:
                        found.append((where, node.lineno, f"class {node.name}({name})"))
    return places(found)


def test_getters_are_constructed_by_the_factory_alone() -> None:
    assert getter_constructions(ROOT) == [], (
        f"a shard getter is made by kinesis_spout.kinesis.retrieval.factory only (shard_retrieval, polling_getter, "
        f"paced_getter, waiting_fan_out), and no class derives from one: {getter_constructions(ROOT)}")


def test_every_spelling_of_a_construction_or_a_subclass_is_found_and_the_factory_is_not(tmp_path: Path) -> None:
    write_library(tmp_path, {
        FACTORY.removeprefix("kinesis_spout/"): "def make(c):\n    return ShardGetter(c)\n",
        "reads.py": "from kinesis_spout.kinesis.retrieval import polling\n"
                    "from kinesis_spout.kinesis.retrieval.fanout import FanOutGetter as Pushed\n"
                    "a = polling.ShardGetter(None)\n"
                    "b = Pushed(None)\n"
                    "c = WaitingFanOut(b, 3)\n"
                    "class Mine(polling.PacedGetter):\n"
                    "    pass\n"
                    "d = ShardGetterish(None)\n"
                    "e = polling.shard_getter(None)\n"})
    assert getter_constructions(tmp_path) == [
        "kinesis_spout/reads.py:3: ShardGetter(...)", "kinesis_spout/reads.py:4: FanOutGetter(...)",
        "kinesis_spout/reads.py:5: WaitingFanOut(...)", "kinesis_spout/reads.py:6: class Mine(PacedGetter)"]
