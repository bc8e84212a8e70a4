"""A griffe extension for the API reference (mkdocs.yml, mkdocstrings' python handler): Sphinx cross-reference
roles in docstrings (``:class:`~kinesis_spout.spout.batch.SpoutBatch```, ``:meth:`ack```...) become links.

mkdocstrings renders docstrings as Markdown and leaves Sphinx roles as they are (``:class:<code>...</code>`` on
the page). Each role is rewritten, once griffe has loaded the package, into an autorefs cross-reference to the
object's canonical path: a link where the reference renders that object, its name in code where it does not (an
internal module, say). Targets are resolved as Sphinx would: a dotted path as it is (a name re-exported by
``kinesis_spout`` or ``kinesis_spout.testing`` to where it is defined), a bare name in the scope of the docstring's
object (its members, its module's names). ``~`` shows the last component only; ``:meth:`` and ``:func:`` add
``()``. Who calls: mkdocstrings-python, through ``extensions:`` in mkdocs.yml; it changes the docstrings griffe
hands to the templates, nothing in the package.
"""

from __future__ import annotations

import html
import re
from typing import Any

from griffe import Extension, Object

#: ``:role:`target``` or ``:role:`title <target>``` (with an optional ``py:`` domain)
ROLE = re.compile(r":(?:py:)?(class|meth|func|data|attr|mod|exc|obj|const):`(~?)([^`<]*?)(?:\s*<([^`>]+)>)?`")
#: Packages whose names load lazily from their modules (PEP 562): a re-exported name maps to where it lives
LAZY_PACKAGES = ("kinesis_spout", "kinesis_spout.testing")


def _lazy_homes() -> dict[str, str]:
    """``kinesis_spout.X`` -> ``kinesis_spout.module.X`` for the names of :data:`LAZY_PACKAGES`."""
    import importlib

    homes: dict[str, str] = {}
    for package in LAZY_PACKAGES:
        where = getattr(importlib.import_module(package), "_WHERE", {})
        homes.update({f"{package}.{name}": f"{module}.{name}" for name, module in where.items()})
    return homes


class SphinxRoles(Extension):
    """Rewrites the Sphinx roles of every docstring into autorefs cross-references (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.homes = _lazy_homes()

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        docstring = obj.docstring
        if docstring is None or ":`" not in docstring.value:
            return
        docstring.value = ROLE.sub(lambda match: self._reference(obj, match), docstring.value)

    def _reference(self, obj: Object, match: re.Match[str]) -> str:
        role, short, first, explicit = match.groups()
        target = (explicit or first).strip().lstrip("~")
        title = first.strip() if explicit else (target.rsplit(".", 1)[-1] if short else target)
        if role in ("meth", "func") and not explicit:
            title += "()"
        path = self._resolve(obj, target)
        return (f'<autoref identifier="{html.escape(path, quote=True)}" optional><code>{html.escape(title)}</code>'
                f"</autoref>")

    def _resolve(self, obj: Object, target: str) -> str:
        """The canonical path of ``target`` as seen from ``obj``'s docstring; ``target`` itself when unknown. A
        target that does not start with a package (``SequenceKey.rank``, ``ack``) is looked up from its first name
        in the scope of ``obj``, then of its parents."""
        target = self.homes.get(target, target)
        first, dot, rest = target.partition(".")
        if first != "kinesis_spout":
            scope: Any = obj
            while scope is not None:
                try:
                    target = scope.resolve(first) + dot + rest
                    break
                except Exception:  # noqa: BLE001, S112 - not in this scope: try the enclosing one
                    scope = scope.parent
        try:
            return str(obj.modules_collection[target].canonical_path)
        except Exception:  # noqa: BLE001 - not loaded, or an alias griffe cannot follow: the path as written
            return self.homes.get(target, target)
