"""The architecture page's map (layers, contracts, third-party imports, layout) matches pyproject.toml and the code,
and a drift is named.

scripts/architecture.py renders the page's generated blocks from the import-linter contracts and the files of
kinesis_spout; `make docs` runs its --check. Who calls: pytest (``tests/unit/tooling``).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from .script_modules import load_script

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def architecture() -> ModuleType:
    return load_script("architecture")


def test_the_architecture_page_is_what_the_contracts_and_the_code_render(architecture: ModuleType) -> None:
    assert architecture.rendered() == architecture.PAGE.read_text(encoding="utf-8"), (
        "docs/architecture.md no longer matches pyproject.toml and the code: run "
        "`python scripts/architecture.py --write` (and describe a new part in its HOLDS)")


def test_every_package_and_top_level_module_is_on_the_page_with_its_layer(architecture: ModuleType) -> None:
    page = architecture.PAGE.read_text(encoding="utf-8")
    for path in sorted((ROOT / "kinesis_spout").rglob("__init__.py")):
        if path.parent.name != "kinesis_spout":
            part = path.parent.relative_to(ROOT / "kinesis_spout").as_posix()
            assert f"| `{part}/` |" in page, part
    assert "| `spark/sink/` | adapters |" in page and "| `retry.py` | core |" in page
    assert "| kazoo | `testing/`, `zookeeper/` |" in page


def test_a_part_without_a_description_or_a_description_without_a_part_is_named(
        architecture: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    real = architecture.parts()
    monkeypatch.setattr(architecture, "parts", lambda: {**real, "spark/loose/": real["spark/"]})
    monkeypatch.delitem(architecture.HOLDS, "retry.py")
    monkeypatch.setitem(architecture.HOLDS, "tracking_old/", "the tracker before")
    with pytest.raises(architecture.DriftError) as drift:
        architecture.rendered()
    assert "describe ['retry.py', 'spark/loose/'] in HOLDS" in str(drift.value)
    assert "remove ['tracking_old/'] from HOLDS" in str(drift.value)


def test_a_part_in_no_layer_is_named_and_a_new_module_makes_the_page_drift(
        architecture: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = architecture.parts()
    monkeypatch.setitem(architecture.HOLDS, "sinks/", "a package the layers do not list")
    monkeypatch.setattr(architecture, "parts", lambda: {**real, "sinks/": tmp_path})
    with pytest.raises(architecture.DriftError, match=r"place \['sinks/'\] in a layer"):
        architecture.rendered()
    monkeypatch.delitem(architecture.HOLDS, "sinks/")
    (tmp_path / "extra.py").write_text("", encoding="utf-8")
    monkeypatch.setattr(architecture, "parts", lambda: {**real, "zookeeper/": tmp_path})
    assert "| `zookeeper/` | I/O |" in architecture.render_layout()
    assert architecture.rendered() != architecture.PAGE.read_text(encoding="utf-8")
