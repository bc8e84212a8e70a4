"""How the library reads its configuration, counted from the source (no import of the library but its setting names):
which modules take the whole ``SpoutConfig``, and how many reads go by flat name (``config.retry_limit``) and how
many by group (``config.tracking``, then ``tracking.retry_limit``).

A read is an attribute read off a whole config: an expression whose last name is ``config``, ``cfg`` or ends with
``_config`` (``config``, ``self._config``, ``emitter.config``...), followed by a flat setting name (a flat read) or by
a group name (a group read). A module takes the whole config when a parameter, a return or an attribute of it is
annotated with ``SpoutConfig``. Modules under ``kinesis_spout/config/`` are the config itself and are not counted.

Usage: python scripts/config_reads.py [--list]   (--list names each flat read, path:line: expression)
tests/unit/tooling/test_config_reads.py holds the library to reading settings by group.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any folder: this checkout's kinesis_spout
    sys.path.insert(0, str(ROOT))

from kinesis_spout.config.names import FLAT_FIELDS, GROUP_CLASSES  # noqa: E402

CONFIG_PACKAGE = "kinesis_spout/config/"


def is_whole_config(node: ast.expr) -> bool:
    """Whether ``node`` names a whole config by the house's spelling: ``config``, ``cfg``, ``*_config``, alone or as
    the last attribute (``self.config``, ``emitter.config``)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name in ("config", "cfg", "_cfg") or name.endswith("_config")


@dataclass
class Reads:
    """What one module reads off a whole config."""

    path: str
    takes_config: bool = False
    flat: list[tuple[int, str]] = field(default_factory=list)
    groups: list[tuple[int, str]] = field(default_factory=list)


def _mentions_spout_config(annotation: ast.expr) -> bool:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return "SpoutConfig" in annotation.value
    return any(isinstance(n, ast.Name) and n.id == "SpoutConfig" or isinstance(n, ast.Attribute)
               and n.attr == "SpoutConfig" for n in ast.walk(annotation))


def module_reads(path: Path, root: Path = ROOT) -> Reads:
    """The reads of one module (one walk of its tree)."""
    where = path.relative_to(root).as_posix()
    reads = Reads(where)
    text = path.read_text(encoding="utf-8")
    if "config." not in text and "cfg." not in text and "SpoutConfig" not in text:
        return reads  # neither reads off a config nor takes one: not worth a parse
    annotations: list[ast.expr] = []
    for node in ast.walk(ast.parse(text, where)):
        if isinstance(node, ast.Attribute):
            if is_whole_config(node.value):
                if node.attr in FLAT_FIELDS:
                    reads.flat.append((node.lineno, ast.unparse(node)))
                elif node.attr in GROUP_CLASSES:
                    reads.groups.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.arg) and node.annotation is not None:
            annotations.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
    reads.takes_config = any(_mentions_spout_config(a) for a in annotations)
    reads.flat.sort()
    reads.groups.sort()
    return reads


def library_reads(root: Path = ROOT) -> list[Reads]:
    """The reads of every library module outside ``kinesis_spout/config/``."""
    paths = sorted((root / "kinesis_spout").rglob("*.py"))
    return [module_reads(p, root) for p in paths if not p.relative_to(root).as_posix().startswith(CONFIG_PACKAGE)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="name each flat read")
    args = parser.parse_args(argv)
    reads = library_reads()
    taking = [r.path for r in reads if r.takes_config]
    print(f"modules taking the whole SpoutConfig: {len(taking)}")
    print(f"reads by flat name: {sum(len(r.flat) for r in reads)} in "
          f"{sum(1 for r in reads if r.flat)} modules")
    print(f"reads by group: {sum(len(r.groups) for r in reads)} in {sum(1 for r in reads if r.groups)} modules")
    if args.list:
        for r in reads:
            for line, text in r.flat:
                print(f"  {r.path}:{line}: {text}")
        print("taking the whole SpoutConfig: " + ", ".join(taking))
    return 0


if __name__ == "__main__":
    sys.exit(main())
