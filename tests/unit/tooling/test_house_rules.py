"""Three rules of the house's layout, read from the files (no import, no server):

- **No library module over 400 lines.** Every ``kinesis_spout/**/*.py`` has at most ``MAX_LINES`` lines (as
  ``wc -l`` counts them); the failure names each longer module and its length. A longer module is split by concept.
- **No loose module at the root of ``kinesis_spout/spark/``.** Only its ``__init__.py`` (the lazy public names)
  sits there; every other module lives in the package that owns it (``source/``, ``pipeline/``, ``sink/``,
  ``bookkeeping/``...). The failure names each loose module.
- **No test module imported by another module of the tests.** A test module is a ``test_*.py`` file under
  ``tests/``; no module under ``tests/`` (test, support or conftest) imports one, by an absolute import
  (``import tests.a.test_b``, ``from tests.a.test_b import x``, ``from tests.a import test_b``) or a relative one
  (``from .test_b import x``, ``from . import test_b``, ``from ..a.test_b import x``). What tests share lives in a
  support module, any name pytest does not collect (``support.py``, ``emissions.py``, ``snippets.py``...), which
  any test may import. Only ``import`` statements are read: ``importlib`` calls are not seen.

Who calls: pytest (``tests/unit/tooling``); ``make lint`` does not run it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
#: The most lines a library module may have.
MAX_LINES = 400
#: The packages whose root holds no module but ``__init__.py``: their modules live in the subpackage that owns them.
NO_LOOSE_MODULES = ("kinesis_spout/spark",)


def long_modules(root: Path) -> dict[str, int]:
    """Each module of ``root/kinesis_spout`` over ``MAX_LINES`` lines, by its path from ``root``, with its length."""
    found: dict[str, int] = {}
    for path in sorted((root / "kinesis_spout").rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            found[path.relative_to(root).as_posix()] = lines
    return found


def loose_modules(root: Path) -> list[str]:
    """Each module (``*.py`` but ``__init__.py``) at the root of a package of ``NO_LOOSE_MODULES``, by its path from
    ``root``."""
    return sorted(path.relative_to(root).as_posix() for package in NO_LOOSE_MODULES
                  for path in (root / package).glob("*.py") if path.name != "__init__.py")


def _is_test_module(root: Path, dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] == "tests" and parts[-1].startswith("test_") and (root.joinpath(*parts[:-1]) /
                                                                        f"{parts[-1]}.py").is_file()


def _imported_names(root: Path, path: Path) -> Iterator[tuple[int, str]]:
    """Each module ``path`` may import by its ``import`` statements (with the line), as dotted names from ``root``:
    for ``from P import a``, both ``P`` and ``P.a`` (``a`` may be a module or a name)."""
    package = list(path.relative_to(root).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def imports_of_test_modules(root: Path) -> list[str]:
    """Each import of a test module by a module under ``root/tests``, as ``importer:line imports module``."""
    found: list[str] = []
    for path in sorted((root / "tests").rglob("*.py")):
        importer = path.relative_to(root).as_posix()
        for line, name in _imported_names(root, path):
            if _is_test_module(root, name) and root.joinpath(*name.split(".")).with_suffix(".py") != path:
                found.append(f"{importer}:{line} imports {name}")
    return sorted(set(found))


def test_no_library_module_is_over_400_lines() -> None:
    found = long_modules(ROOT)
    assert found == {}, f"library modules over {MAX_LINES} lines (split each by concept): {found}"


def test_no_module_sits_loose_at_the_root_of_the_spark_package() -> None:
    found = loose_modules(ROOT)
    assert found == [], ("modules loose at the root of kinesis_spout/spark/ (move each into the package that owns "
                         f"it: source/, pipeline/, sink/, bookkeeping/... and update its imports): {found}")


def test_no_module_of_the_tests_imports_a_test_module() -> None:
    found = imports_of_test_modules(ROOT)
    assert found == [], ("test modules imported by other modules (move what they share into a support module, "
                         "e.g. support.py): " + "; ".join(found))


def _plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_module_over_400_lines_is_named_with_its_length(tmp_path: Path) -> None:
    root = _plant(tmp_path, {"kinesis_spout/__init__.py": "", "kinesis_spout/short.py": "x = 1\n" * MAX_LINES,
                             "kinesis_spout/inner/long.py": "x = 1\n" * (MAX_LINES + 1)})
    assert long_modules(root) == {"kinesis_spout/inner/long.py": MAX_LINES + 1}


def test_a_loose_spark_module_is_named_and_a_package_s_modules_are_not(tmp_path: Path) -> None:
    root = _plant(tmp_path, {"kinesis_spout/spark/__init__.py": "", "kinesis_spout/spark/offsets.py": "",
                             "kinesis_spout/spark/source/__init__.py": "", "kinesis_spout/spark/source/driver.py": "",
                             "kinesis_spout/spark/README.md": ""})
    assert loose_modules(root) == ["kinesis_spout/spark/offsets.py"]


def test_every_spelling_of_a_test_module_import_is_found_and_support_modules_are_not(tmp_path: Path) -> None:
    root = _plant(tmp_path, {
        "tests/__init__.py": "",
        "tests/a/__init__.py": "",
        "tests/a/support.py": "X = 1\n",
        "tests/a/test_one.py": "from .support import X\n",
        "tests/a/test_two.py": "from .test_one import X\n",
        "tests/a/test_three.py": "from . import test_one\n",
        "tests/a/test_four.py": "import tests.a.test_one\n",
        "tests/a/test_five.py": "from tests.a import test_one, support\n",
        "tests/b/__init__.py": "",
        "tests/b/test_six.py": "from ..a.test_one import X\nfrom ..a.support import X as Y\n",
        "tests/b/helpers.py": "from tests.a.test_one import X\n",
    })
    assert imports_of_test_modules(root) == [
        "tests/a/test_five.py:1 imports tests.a.test_one",
        "tests/a/test_four.py:1 imports tests.a.test_one",
        "tests/a/test_three.py:1 imports tests.a.test_one",
        "tests/a/test_two.py:1 imports tests.a.test_one",
        "tests/b/helpers.py:1 imports tests.a.test_one",
        "tests/b/test_six.py:1 imports tests.a.test_one",
    ]
