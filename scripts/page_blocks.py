"""The generated blocks of a page: text between a BEGIN and an END marker, rendered again from the code.

Who calls: scripts/architecture.py (docs/architecture.md) and scripts/docs_reference.py (the reference pages and
kinesis_spout/config/flat.py), each with its own markers and renderers. Nothing here reads or writes a file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]


class DriftError(Exception):
    """A page and the code disagree in a way rendering cannot settle: a block's markers are missing, or the code and
    what a script writes about it (a part without a description, a setting without a meaning...) differ."""


def render_blocks(page: Path, text: str, renderers: dict[str, Callable[[], str]], begin: str, end: str) -> str:
    """``text`` (the text of ``page``) with the block of each name of ``renderers`` replaced by what its renderer
    returns, between its markers (``begin`` and ``end`` formatted with ``name``), which stay.

    Raises DriftError naming ``page``, the block and its markers when one is missing.
    """
    for name, render in renderers.items():
        first, last = begin.format(name=name), end.format(name=name)
        if first not in text or last not in text:
            raise DriftError(f"{page.relative_to(ROOT)}: the markers of the generated block {name!r} are missing: "
                             f"{first} ... {last}")
        head, rest = text.split(first, 1)
        _, tail = rest.split(last, 1)
        text = f"{head}{first}\n{render()}\n{last}{tail}"
    return text
