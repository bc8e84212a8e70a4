"""A rule of the house, read from the files (no server): every library module logs under its own name.

A module's logger is ``logging.getLogger(__name__)`` (``kinesis_spout.<package>.<module>``), so configuring the
``kinesis_spout`` logger reaches every line, and configuring a package's (``kinesis_spout.coordination``) reaches
its modules'. No module hard-codes a logger name of the library; the one named logger is kazoo's
(``kinesis_spout.kazoo``, which a session hands to its client). And each logger name the documentation, the README and
the examples tell users to configure is one of those: a logging module's, a package above one, or kazoo's.

Who calls: pytest (``tests/unit/tooling``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .library_source import library_modules, places, write_library

ROOT = Path(__file__).resolve().parents[3]
#: Named loggers a module may make, with why: (module, name).
NAMED = {("kinesis_spout/zookeeper/security.py", "kinesis_spout.kazoo")}  # kazoo's own lines, secrets masked
#: How the docs name a logger: getLogger("...") in a snippet, or "logger `...`" in the text.
DOC_NAME = re.compile(r"""getLogger\(["'](kinesis_spout[\w.]*)["']\)|logger `(kinesis_spout[\w.]*)`""")


def _is_get_logger(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr == "getLogger")
        or (isinstance(node.func, ast.Name) and node.func.id == "getLogger"))


def hard_coded_loggers(root: Path) -> list[str]:
    """Each logger of ``root/kinesis_spout`` not named ``__name__``, as ``"path:line: what"``: a module-level logger
    made with another name, and a ``getLogger`` anywhere of a name under ``kinesis_spout.`` (the package's own
    logger, ``"kinesis_spout"``, may be configured by name inside a function)."""
    found: list[tuple[str, int, str]] = []
    for where, tree in library_modules(root):
        module_level = {id(s.value) for s in tree.body if isinstance(s, (ast.Assign, ast.AnnAssign))}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not _is_get_logger(node) or not node.args:
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Name) and arg.id == "__name__":
                continue
            name = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
            if (where, name) in NAMED:
                continue
            if id(node) in module_level or (name or "").startswith("kinesis_spout."):
                found.append((where, node.lineno, f"getLogger({ast.unparse(arg)})"))
    return places(found)


def library_loggers(root: Path) -> set[str]:
    """The loggers of ``root/kinesis_spout`` one can configure: each module's that logs (``getLogger(__name__)``),
    every package above one, and the named ones of :data:`NAMED`."""
    names = {logger for _, logger in NAMED}
    for where, tree in library_modules(root):
        if any(_is_get_logger(n) and isinstance(n.args[0], ast.Name) and n.args[0].id == "__name__"
               for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args):
            parts = Path(where).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return names


def documented_loggers(root: Path) -> list[str]:
    """Each logger name the docs, the README and the examples give that is not the library's, as
    ``"path:line: name"``."""
    found = []
    known = library_loggers(root)
    pages = [*sorted((root / "docs").rglob("*.md")), root / "README.md", *sorted((root / "examples").rglob("*.py"))]
    for page in pages:
        where = page.relative_to(root).as_posix()
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for match in DOC_NAME.finditer(line):
                name = match.group(1) or match.group(2)
                if name not in known:
                    found.append(f"{where}:{number}: {name}")
    return found


def test_every_library_module_logs_under_its_own_name() -> None:
    assert hard_coded_loggers(ROOT) == [], (
        f"log with log = logging.getLogger(__name__): every logger of the library is then under the package's "
        f"(kinesis_spout), named after its module: {hard_coded_loggers(ROOT)}")


def test_the_loggers_the_docs_tell_users_to_configure_are_the_library_s() -> None:
    assert documented_loggers(ROOT) == [], (
        f"a logger the docs name is one a module logs under (its dotted path), a package above one, or "
        f"kazoo's (kinesis_spout.kazoo): {documented_loggers(ROOT)}")


def test_every_hard_coded_name_and_wrong_documented_name_is_found(tmp_path: Path) -> None:
    write_library(tmp_path, {
        "__init__.py": "", "spark/__init__.py": "", "spark/lag.py": "LAG = 1\n",
        "spark/lag_listener.py": "import logging\n"
                                 "from logging import getLogger\n"
                                 "log = logging.getLogger(__name__)\n"
                                 "other = getLogger('kinesis_spout')\n"
                                 "def main():\n"
                                 "    logging.getLogger('kinesis_spout').setLevel(10)\n"
                                 "    logging.getLogger('werkzeug').setLevel(40)\n"
                                 "    logging.getLogger('kinesis_spout.spark.lag').info('x')\n"})
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(
        "one line per progress (logger `kinesis_spout.spark.lag`), or (logger `kinesis_spout.spark.lag_listener`)\n"
        "logging.getLogger(\"kinesis_spout.spark\").setLevel(logging.INFO)\n"
        "logging.getLogger(\"kinesis_spout.kazoo\").setLevel(logging.WARNING)\n", encoding="utf-8")
    (tmp_path / "README.md").write_text("logging.getLogger('kinesis_spout.sparks')\n", encoding="utf-8")
    (tmp_path / "examples").mkdir()
    assert hard_coded_loggers(tmp_path) == [
        "kinesis_spout/spark/lag_listener.py:4: getLogger('kinesis_spout')",
        "kinesis_spout/spark/lag_listener.py:8: getLogger('kinesis_spout.spark.lag')"]
    assert documented_loggers(tmp_path) == ["docs/page.md:1: kinesis_spout.spark.lag",
                                            "README.md:1: kinesis_spout.sparks"]
