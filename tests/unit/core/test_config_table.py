"""The table of settings is the one source of the flat keywords, the typed flat spelling and the string options.

:data:`kinesis_spout.config.names.SETTINGS` holds one row per setting; ``FLAT_FIELDS``, ``OPTION_NAMES`` and the
option parser are made from it when the package loads, ``FlatSettings`` and ``FlatView`` are rendered from it into
``kinesis_spout/config/flat.py`` by ``scripts/docs_reference.py --write`` (tests/unit/tooling/test_docs_reference.py
checks the module is what the table renders). These tests fail, naming the setting, when a field of a group has no
row, or when a row is missing from one of the derived forms.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Any

from kinesis_spout.config import OPTION_NAMES, SpoutConfig
from kinesis_spout.config.flat import FlatSettings, FlatView
from kinesis_spout.config.names import (
    DERIVED_FIELDS,
    FLAT_FIELDS,
    GROUP_CLASSES,
    OPTION_KINDS,
    OWN_FIELDS,
    SETTINGS,
    camel,
)


def _groups() -> dict[str, Any]:
    sample = SpoutConfig(stream_name="s", app_name="a")
    return {group: type(getattr(sample, group)) for group in GROUP_CLASSES}


def test_every_field_of_every_group_has_one_row_and_every_row_names_a_field() -> None:
    rows = [(s.group, s.field) for s in SETTINGS]
    fields = [(group, f.name) for group, kind in _groups().items() for f in dataclasses.fields(kind)]
    assert sorted(set(fields) - set(rows)) == [], "group fields without a row in config/names.py SETTINGS"
    assert sorted(set(rows) - set(fields)) == [], "rows of SETTINGS naming no field of their group"
    assert len(rows) == len(set(rows)) and len(SETTINGS) == len({s.flat for s in SETTINGS}), "a row twice"
    assert [f.name for f in dataclasses.fields(SpoutConfig)] == [*OWN_FIELDS, *DERIVED_FIELDS, *GROUP_CLASSES]


def test_every_row_is_in_each_derived_form() -> None:
    typed = FlatSettings.__annotations__
    view = {name for name, value in vars(FlatView).items() if isinstance(value, cached_property)}
    parts = {target.split(".", 1)[0] for target in OPTION_NAMES.values() if "." in target}
    missing: list[str] = []
    for s in SETTINGS:
        missing += [f"{s.flat}: FLAT_FIELDS"] if FLAT_FIELDS.get(s.flat) != (s.group, s.field) else []
        missing += [f"{s.flat}: FlatSettings"] if s.flat not in typed else []
        missing += [f"{s.flat}: FlatView"] if s.flat not in view else []
        missing += [f"{s.flat}: OPTION_KINDS"] if s.option not in OPTION_KINDS else []
        if s.option == "parts":
            missing += [f"{s.flat}: options of its fields"] if s.flat not in parts else []
        elif s.option != "python":
            missing += [f"{s.flat}: OPTION_NAMES"] if OPTION_NAMES.get(camel(s.flat)) != s.flat else []
    assert missing == [], "run `python scripts/docs_reference.py --write` (flat.py) or fix the table"
    flat = {s.flat for s in SETTINGS}
    assert set(typed) == flat and view == flat and set(FLAT_FIELDS) == flat, "a derived form holds a setting too many"
    assert {t.split(".", 1)[0] for t in OPTION_NAMES.values()} == {
        *OWN_FIELDS, *(s.flat for s in SETTINGS if s.option != "python")}


def test_every_flat_read_returns_the_group_field_it_names() -> None:
    config = SpoutConfig(stream_name="s", app_name="a")
    for s in SETTINGS:
        assert getattr(config, s.flat) is getattr(getattr(config, s.group), s.field), s.flat
