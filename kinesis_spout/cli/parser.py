"""The ``kinesis-spout`` parser and ``main``. Each command group is a module of this package with a
``register(sub)`` that adds its sub-parser(s) and sets ``run`` (a function of the parsed arguments that returns the
exit code). Adding a group: a new module, and its name in ``GROUPS``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import kinesis_spout
from kinesis_spout.cli.common import missing_from_env
from kinesis_spout.errors import SpoutError

#: The command group modules of this package, in the order ``--help`` lists their commands.
GROUPS: tuple[str, ...] = ("demo", "checkpoints", "status", "dev_servers", "dead_letters", "consumers")


def build_parser() -> argparse.ArgumentParser:
    """The whole parser; built on each call, so defaults read from the environment are the current ones."""
    parser = argparse.ArgumentParser(prog="kinesis-spout", description="Read Amazon Kinesis into Spark.")
    parser.add_argument("--version", action="version", version=f"kinesis-spout {kinesis_spout.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in GROUPS:
        importlib.import_module(f"kinesis_spout.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The console entry point: parse, run the command, print a ``SpoutError`` as one line and exit 1."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and not getattr(args, "passes_rest", False):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    missing = missing_from_env(args)
    if missing:
        getattr(args, "usage_error", parser.error)(missing)  # the sub-command's usage, when it gave its own
    args.rest = rest
    try:
        return int(args.run(args))
    except SpoutError as exc:
        print(f"kinesis-spout: error: {exc}", file=sys.stderr)
        return 1
