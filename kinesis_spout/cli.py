"""The ``kinesis-spout`` command: ``demo`` runs the word count; ``checkpoints`` lists an app's checkpoints."""

from __future__ import annotations

import argparse
import os
import sys

from kinesis_spout.errors import SpoutError


def _checkpoints(args: argparse.Namespace) -> int:
    from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore
    from kinesis_spout.config import SpoutConfig

    config = SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=args.zookeeper,
                         zookeeper_prefix=args.prefix)
    store = ZooKeeperCheckpointStore.from_config(config)
    store.open()
    try:
        checkpoints = store.list()
    finally:
        store.close()
    print(f"checkpoints of app {args.app!r} on stream {args.stream!r} at {config.checkpoint_path}")
    if not checkpoints:
        print("(none)")
        return 0
    print(f"{'shard':<24} {'checkpoint':<58} {'shard_end':<9} {'owner':<24} updated_at")
    for shard_id, cp in checkpoints.items():
        updated = cp.updated_at.isoformat() if cp.updated_at else "-"
        print(f"{shard_id:<24} {cp.sequence_number or '-':<58} {str(cp.shard_end).lower():<9} "
              f"{cp.owner:<24} {updated}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kinesis-spout", description="Read Amazon Kinesis into Spark.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the word-count demo (embedded servers unless told otherwise)",
                   add_help=False)
    cps = sub.add_parser("checkpoints", help="list an app's checkpoints in ZooKeeper")
    cps.add_argument("--stream", required=True)
    cps.add_argument("--app", required=True)
    cps.add_argument("--zookeeper", default=os.environ.get("KINESIS_SPOUT_ZOOKEEPER", "127.0.0.1:2181"))
    cps.add_argument("--prefix", default="/kinesis_spout", help="zookeeper_prefix of the app")
    args, rest = parser.parse_known_args(argv)
    try:
        if args.command == "demo":
            from kinesis_spout import demo

            return demo.main(rest)
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return _checkpoints(args)
    except SpoutError as exc:
        print(f"kinesis-spout: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
