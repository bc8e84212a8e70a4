"""The API reference (docs/reference/api.md, rendered by mkdocstrings) as a reader sees it in the built site: every
public name of ``kinesis_spout``, ``kinesis_spout.spark`` and ``kinesis_spout.testing`` has its entry, no Sphinx
role is left raw (``:class:`~kinesis_spout...```), and every cross-reference to an object the reference shows is a
link (the others, to internal modules, are shown as code). Builds the site with mkdocs into a temporary folder."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("kinesis_spout", "kinesis_spout.spark", "kinesis_spout.testing")
RAW_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|data|attr|mod|exc|obj|const):(?:`|<code>)")
UNRESOLVED = re.compile(r'<span title="([^"]+)"><code>')


def inventory(site: Path) -> set[str]:
    """The objects the built reference renders (mkdocstrings' objects.inv: 4 header lines, then zlib)."""
    body = (site / "objects.inv").read_bytes().split(b"\n", 4)[4]
    return {line.split(" ", 1)[0] for line in zlib.decompress(body).decode().splitlines() if line}


def public_paths() -> dict[str, str]:
    """``package.Name`` -> where the name is defined (``module.Name``), for the public names of PACKAGES."""
    paths: dict[str, str] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        where: dict[str, str] = getattr(module, "_WHERE", {})
        for name in module.__all__:
            if name.startswith("__"):
                continue
            home = where.get(name) or getattr(getattr(module, name), "__module__", package)
            paths[f"{package}.{name}"] = f"{home}.{name}"
    return paths


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed (the dev extra: make docs installs it)")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "-q", "-d", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_no_page_of_the_site_shows_a_raw_sphinx_role(site: Path) -> None:
    raw = [f"{page.relative_to(site)}: ...{text[max(0, m.start() - 60):m.end() + 60]}..."
           for page in site.rglob("*.html") for text in [page.read_text()] for m in RAW_ROLE.finditer(text)]
    assert raw == [], "\n".join(raw[:20])


def test_every_public_name_has_an_entry_in_the_reference(site: Path) -> None:
    rendered = inventory(site)
    missing = sorted(public for public, home in public_paths().items() if home not in rendered)
    assert missing == [], missing


def test_every_cross_reference_to_an_object_of_the_reference_is_a_link(site: Path) -> None:
    """An unresolved cross-reference is shown as code with its target in a tooltip: allowed for internal objects
    the reference does not show, never for a public name or anything the reference renders."""
    page = (site / "reference" / "api" / "index.html").read_text()
    rendered = inventory(site) | set(public_paths().values())
    unlinked = sorted({target for target in UNRESOLVED.findall(page) if target in rendered})
    assert unlinked == [], unlinked
    assert 'class="autorefs autorefs-internal"' in page
