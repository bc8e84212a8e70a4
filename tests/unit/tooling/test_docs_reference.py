"""The generated reference pages (configuration, command line) match the code, and a drift is named.

scripts/docs_reference.py renders the pages' generated blocks from kinesis_spout.config, kinesis_spout.spark and
the command line's parser; `make docs` runs its --check.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from .script_modules import load_script

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    return load_script("docs_reference")


def test_the_reference_pages_are_what_the_code_renders(reference: ModuleType) -> None:
    for page in reference.GENERATED:
        assert reference.rendered(page) == page.read_text(), (
            f"{page.relative_to(ROOT)} no longer matches the code: run `python scripts/docs_reference.py --write`")


def test_the_check_command_passes_on_the_committed_pages() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_reference.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_every_setting_and_option_is_on_the_page_with_its_default(reference: ModuleType) -> None:
    from kinesis_spout.config.names import FLAT_FIELDS
    from kinesis_spout.config.options import OPTION_NAMES

    page = reference.CONFIG_PAGE.read_text()
    for flat in FLAT_FIELDS:
        assert f"| `{flat}` |" in page, flat
    for option in OPTION_NAMES:
        assert f"`{option}`" in page, option
    assert "| `retry_limit` | `tracking.retry_limit` | `retryLimit` | `3` |" in page
    assert "| `max_inflight_bytes` | `tracking.max_inflight_bytes` | `maxInflightBytes` | `64 MiB` |" in page


def test_a_setting_of_the_code_without_a_meaning_is_named(reference: ModuleType,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from kinesis_spout.config import names

    monkeypatch.setitem(names.FLAT_FIELDS, "made_up_setting", ("reading", "made_up_setting"))
    with pytest.raises(reference.DriftError, match=r"add \['made_up_setting'\]"):
        reference.render_settings()


def test_a_meaning_without_a_setting_is_named(reference: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(reference.MEANINGS, "gone_setting", "a setting the code no longer has")
    with pytest.raises(reference.DriftError, match=r"remove \['gone_setting'\]"):
        reference.render_settings()


def test_an_edited_default_or_a_new_command_option_shows_as_a_difference(reference: ModuleType,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    page = reference.CONFIG_PAGE
    edited = page.read_text().replace("| `retryLimit` | `3` |", "| `retryLimit` | `5` |")
    assert edited != page.read_text()
    assert reference.rendered(page, edited) == page.read_text()  # rendering puts the code's default back

    real = reference.cli_parser

    def with_new_flag() -> argparse.ArgumentParser:
        parser = real()
        parser.add_argument("--brand-new-flag", help="a flag the page does not show yet")
        return parser

    monkeypatch.setattr(reference, "cli_parser", with_new_flag)
    assert "--brand-new-flag" in reference.rendered(reference.CLI_PAGE)
    assert "--brand-new-flag" not in reference.CLI_PAGE.read_text()
