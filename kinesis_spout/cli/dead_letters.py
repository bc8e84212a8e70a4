"""``kinesis-spout dead-letters {list,replay} FILE|stream:NAME``: see ``kinesis_spout.deadletters.replay``."""

from __future__ import annotations

import argparse
from typing import Any

from kinesis_spout.cli.common import add_kinesis_arguments


def register(sub: Any) -> None:
    """Add the ``dead-letters`` sub-parser. Who calls: ``kinesis_spout.cli.parser.build_parser``."""
    dl = sub.add_parser("dead-letters", help="count dead letters, or put them back onto a stream (at least once)")
    dl.add_argument("action", choices=["list", "replay"])
    dl.add_argument("source", help="a JSON Lines file of dead letters, or stream:NAME for a dead-letter stream")
    dl.add_argument("--to-stream", help="replay onto this stream (default: each letter's own stream)")
    dl.add_argument("--journal", help="positions replayed: skipped, then added to (default SOURCE.replayed)")
    dl.add_argument("--no-journal", action="store_true", help="replay every letter and keep no journal")
    add_kinesis_arguments(dl, used_for="a dead-letter stream, and replay: ")
    dl.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Count the letters by shard and reason, or put them onto Kinesis (journal first: at least once); either way the
    last line also names the torn lines of a file, which were skipped."""
    from kinesis_spout.deadletters import replay

    found = replay.load_letters(args.source, region=args.region, endpoint_url=args.endpoint_url)
    if args.action == "list":
        for shard, reason, n in replay.count_letters(found.letters):
            print(f"{n:>8}  {shard}  {reason}")
        print(f"{len(found.letters):>8}  letters in all")
        if found.torn:
            print(found.torn_note())
        return 0
    torn = f"; {found.torn_note()}" if found.torn else ""
    journal = None if args.no_journal else args.journal or replay.journal_of(args.source)
    done = replay.replay_to_kinesis(found.letters, args.to_stream, journal, args.region, args.endpoint_url)
    print(f"put {done.put} records" + (f"; skipped {done.skipped} already in {journal}" if journal else "") + torn)
    return 0
