"""The ```python blocks of README.md and of the documentation site (docs/**/*.md), with the marker line before each.

A block's marker is the HTML comment on the line just before its fence: ``<!-- readme-snippet: NAME -->`` (run by
test_readme.py, as a reader who pasted it would run it), ``<!-- not-run ... -->`` (not run: the comment says why),
or none (run by test_docs_snippets.py against the test fixtures). Used by those two test modules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```python\n(.*?)^```\s*$", re.S | re.M)
MARKER = re.compile(r"^<!--\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One ```python block: its page (relative to the checkout), the line of its fence, its marker, its code."""

    page: str
    line: int
    marker: str | None
    code: str

    @property
    def readme_snippet(self) -> str | None:
        """NAME of a ``readme-snippet: NAME`` marker, else None."""
        if self.marker and self.marker.startswith("readme-snippet:"):
            return self.marker.split(":", 1)[1].strip()
        return None

    @property
    def not_run(self) -> bool:
        return bool(self.marker and self.marker.startswith("not-run"))

    @property
    def uses_spark(self) -> bool:
        return "pyspark" in self.code or "spark." in self.code

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def doc_pages() -> list[Path]:
    """Every Markdown page of the site, in a stable order."""
    return sorted(DOCS.rglob("*.md"))


def blocks(page: Path) -> list[Block]:
    """The ```python blocks of ``page``, with the marker of each (the comment on the line before its fence)."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[:max(0, match.start() - 1)].rsplit("\n", 1)[-1]  # the line just before the fence
        comment = MARKER.match(before)
        found.append(Block(str(page.relative_to(ROOT)), line, comment.group(1) if comment else None,
                           match.group(1)))
    return found


def all_blocks() -> list[Block]:
    """The blocks of README.md, then those of the site's pages."""
    return [b for page in (README, *doc_pages()) for b in blocks(page)]
