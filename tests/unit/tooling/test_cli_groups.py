"""The ``kinesis-spout`` command is assembled from its group modules: every group module is registered, and every
command it adds runs something."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import kinesis_spout.cli
from kinesis_spout.cli.parser import GROUPS, build_parser

HELPERS = {"behind", "common", "parser", "__main__"}


def test_every_group_module_is_registered() -> None:
    modules = {m.name for m in pkgutil.iter_modules(kinesis_spout.cli.__path__)} - HELPERS
    assert modules == set(GROUPS), "a command group module must be listed in kinesis_spout.cli.parser.GROUPS"
    for name in GROUPS:
        assert callable(importlib.import_module(f"kinesis_spout.cli.{name}").register)


@pytest.mark.parametrize("argv", [["demo"], ["checkpoints"], ["checkpoints", "reset"], ["status"],
                                  ["dev-servers"], ["install-emulators"], ["dead-letters", "list", "letters.jsonl"],
                                  ["consumers", "list"]])
def test_every_command_parses_to_something_that_runs(argv: list[str]) -> None:
    args, _ = build_parser().parse_known_args(argv)
    assert callable(args.run)
