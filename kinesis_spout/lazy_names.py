"""Public names of a package loaded on first use (PEP 562), the one rule the packages that hand names on share.

``kinesis_spout``, ``kinesis_spout.spark``, ``kinesis_spout.spark.source`` and ``kinesis_spout.testing`` import
nothing at import time: their module-level ``__getattr__`` calls :func:`load` with the table of where each public
name is defined, and ``__dir__`` calls :func:`names`. Pure: imports only the module a name asks for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

__all__ = ["load", "names"]


def load(namespace: dict[str, Any], where: Mapping[str, str], name: str) -> Any:
    """The object ``name`` of the package whose globals are ``namespace``, imported from the module ``where`` names
    and kept in ``namespace`` (later uses do not come back here). Raises ``AttributeError`` naming the package for a
    name it does not have, as Python does. Threads asking for one name at once all store the same object (the import
    system imports a module once), so no lock is needed."""
    module = where.get(name)
    if module is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value


def names(namespace: Mapping[str, Any], where: Mapping[str, str]) -> list[str]:
    """The package's names and its public names not loaded yet, for ``dir()`` and completion."""
    return sorted(set(namespace) | set(where))
