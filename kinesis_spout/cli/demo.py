"""``kinesis-spout demo [ARGS...]``: the word count on embedded servers; its arguments go to ``kinesis_spout.demo``."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    """Add the ``demo`` sub-parser; its own options are parsed by the demo. Who calls: ``cli.parser.build_parser``."""
    demo = sub.add_parser("demo", help="run the word-count demo (embedded servers unless told otherwise)",
                          add_help=False)
    demo.set_defaults(run=run, passes_rest=True)


def run(args: argparse.Namespace) -> int:
    """Run the demo with the arguments the CLI's parser did not read (``args.rest``)."""
    from kinesis_spout import demo

    return demo.main(args.rest)
