"""An import-linter contract type of the project's own: no module imports another module's private name.

``from kinesis_spout.spark.source import _executor_client`` in another module couples it to what its owner may
change at will: the name must become public (or move) first. import-linter's own contracts see modules, not names,
so this one reads each module's ``from ... import`` statements (also those inside functions) with ``ast``.

Configured in pyproject.toml (``[tool.importlinter]``, ``contract_types``) and run by ``lint-imports`` (``make lint``),
which puts the working directory on ``sys.path``: this file is imported as ``tests.import_contracts``.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import cast

import grimp
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module a ``from`` import in ``module`` reads (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def source_file(module: str) -> Path | None:
    """The source file of ``module``, found from its root package's folder without importing anything of it."""
    root, *rest = module.split(".")
    spec = importlib.util.find_spec(root)  # a top-level name: found, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def private_name_imports(module: str) -> list[tuple[str, int]]:
    """Every ``imported_module._name`` that ``module``'s source imports from another of the project's modules,
    with its line number. A module's own private names and dunders (``__version__``) are not reported."""
    path = source_file(module)
    if path is None:
        return []
    root = module.split(".")[0]
    is_package = path.name == "__init__.py"
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = _absolute(module, is_package, node)
        if source == module or source.split(".")[0] != root:
            continue
        found.extend((f"{source}.{alias.name}", node.lineno) for alias in node.names if _is_private(alias.name))
    return found


class PrivateNamesContract(Contract):
    """No module of the root package imports a private name (``_x``) defined in another of its modules.

    Configuration options:

        - ignore_names: ``importer -> module._name`` entries allowed for now (each names a violation that is
          being removed). An entry that matches nothing is reported as a warning, so it gets deleted.
    """

    type_name = "private_names"

    ignore_names = fields.SetField(subfield=fields.StringField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        entries = cast("set[str] | None", self.ignore_names)
        ignored = {" ".join(entry.split()) for entry in entries or ()}
        seen: set[str] = set()
        illegal: list[str] = []
        for module in sorted(graph.modules):
            for name, line in private_name_imports(module):
                entry = f"{module} -> {name}"
                seen.add(entry)
                if entry not in ignored:
                    illegal.append(f"{entry} (l.{line})")
        unmatched = sorted(ignored - seen)
        return ContractCheck(kept=not illegal,
                             warnings=[f"No matches for ignored name import {entry}." for entry in unmatched],
                             metadata={"illegal": illegal})

    def render_broken_contract(self, check: ContractCheck) -> None:
        output.print_error("Private names may only be used inside the module that defines them:", bold=False)
        output.new_line()
        for entry in check.metadata["illegal"]:
            output.print_error(f"- {entry}", bold=False)
        output.new_line()
        output.print("Make the name public (no leading underscore), or move it where both modules can import it.")
