"""``kinesis-spout checkpoints [list|reset]``: an app's checkpoints of a stream, and the rewrite of one of them.

- ``checkpoints --stream S --app A``: a table of the app's checkpoints of the stream.
- ``checkpoints reset --stream S --app A --shard ID --to {trim-horizon,latest,SEQ[:SUB]} --yes``: rewrite one shard's
  checkpoint (it may move backwards: that is the point). Stop the app first, or its next write wins. A shard without a
  checkpoint must be listed by Kinesis (``--endpoint-url``, ``--region``), unless ``--force``.
"""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import sys
from typing import Any

from kinesis_spout.cli.common import (
    AUTH_ENV,
    ENDPOINT_ENV,
    add_zookeeper_arguments,
    check_app_and_stream,
    describe,
    open_store,
    print_table,
    spout_config,
)
from kinesis_spout.errors import ConfigError, SpoutError
from kinesis_spout.positions import LATEST, TRIM_HORIZON, Position, after


def register(sub: Any) -> None:
    """Add the ``checkpoints`` sub-parser. Who calls: ``kinesis_spout.cli.parser.build_parser``."""
    cps = sub.add_parser("checkpoints", help="list an app's checkpoints in ZooKeeper, or reset one",
                         description=f"ZooKeeper digest credentials are read from ${AUTH_ENV} (user:password).")
    cps.add_argument("action", nargs="?", choices=["list", "reset"], default="list")
    add_zookeeper_arguments(cps)
    cps.add_argument("--shard", help="reset: the shard id")
    cps.add_argument("--to", help="reset: trim-horizon, latest, or a sequence number to resume after")
    cps.add_argument("--yes", action="store_true", help="reset: really rewrite the checkpoint")
    cps.add_argument("--force", action="store_true",
                     help="reset: write it without the checks (app and stream names in ZooKeeper, the shard and "
                          "the sequence number with Kinesis)")
    cps.add_argument("--endpoint-url", default=os.environ.get(ENDPOINT_ENV),
                     help="reset: Kinesis endpoint, to check that a shard without a checkpoint exists")
    cps.add_argument("--region", default=None, help="reset: AWS region of the stream")
    cps.add_argument("--tls", action="store_true", help="connect to ZooKeeper over TLS")
    cps.add_argument("--tls-ca", help="PEM file of the CA that signed ZooKeeper's certificate")
    cps.add_argument("--tls-cert", help="PEM client certificate (with --tls-key)")
    cps.add_argument("--tls-key", help="PEM key of the client certificate")
    cps.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """The ``checkpoints`` command: ``reset`` or the listing."""
    return reset(args) if args.action == "reset" else list_checkpoints(args)


def list_checkpoints(args: argparse.Namespace) -> int:
    """Print the app's checkpoints of the stream and its last Spark batch id (read only)."""
    from kinesis_spout.spark.batch_store import ZooKeeperBatchStore

    config = spout_config(args)
    store = open_store(args, config)
    try:
        check_app_and_stream(store, config)
        checkpoints = store.list()
        batch_id = ZooKeeperBatchStore.on_store(store).load_batch_id()
    finally:
        store.close()
    print(f"checkpoints of app {args.app!r} on stream {args.stream!r} at {config.checkpoint_path}")
    if batch_id:
        print(f"last batch id: {batch_id}")
    if not checkpoints:
        print("(none)")
        return 0
    rows: list[tuple[str, ...]] = [("shard", "checkpoint", "shard_end", "owner", "updated_at")]
    for shard_id, cp in checkpoints.items():
        rows.append((shard_id, describe(cp), str(cp.shard_end).lower(), cp.owner or "-",
                     cp.updated_at.isoformat(timespec="seconds") if cp.updated_at else "-"))
    print_table(rows)
    return 0


def parse_target(raw: str) -> Position:
    """``--to`` as the position the checkpoint is reset to."""
    lowered = raw.strip().lower().replace("_", "-")
    if lowered in ("trim-horizon", "latest"):
        return TRIM_HORIZON if lowered == "trim-horizon" else LATEST
    sequence, _, sub = raw.strip().partition(":")
    if sequence.isdigit() and (not sub or sub.isdigit()):
        try:
            return after(sequence, int(sub) if sub else None)
        except ValueError:
            pass  # digits int() does not read: refused below
    raise ConfigError(f"--to must be trim-horizon, latest, a sequence number (decimal digits), or SEQ:SUB for the "
                      f"user record SUB of a KPL aggregate, got {raw!r}")


def unknown_shard(args: argparse.Namespace) -> str | None:
    """Why ``--shard`` is not a shard of the stream (None when Kinesis lists it). Who calls: ``reset``, for a shard
    without a checkpoint, where a typo would otherwise create a phantom checkpoint that nothing ever reads."""
    from kinesis_spout.kinesis.client import make_client
    from kinesis_spout.kinesis.shards import list_shards

    try:
        shard_ids = [s.shard_id for s in list_shards(make_client(args.region, args.endpoint_url), args.stream)]
    except SpoutError as exc:
        return (f"cannot check that stream {args.stream!r} has shard {args.shard!r}: {exc} (pass --endpoint-url and "
                f"--region of the stream)")
    if args.shard in shard_ids:
        return None
    listed = ", ".join(shard_ids[:8]) + (", ..." if len(shard_ids) > 8 else "")
    return f"stream {args.stream!r} has no shard {args.shard!r} (its shards: {listed or 'none'})"


def reset(args: argparse.Namespace) -> int:
    """Rewrite one shard's checkpoint (``--yes``), or print what would change (exit 2)."""
    from kinesis_spout.checkpoint.base import Checkpoint

    if not args.shard or not args.to:
        raise ConfigError("checkpoints reset needs --shard ID and --to {trim-horizon,latest,SEQUENCE_NUMBER}")
    position = parse_target(args.to)
    config = spout_config(args)
    new = Checkpoint.at(args.shard, position)
    store = open_store(args, config)
    try:
        if not args.force:
            check_app_and_stream(store, config)
        try:
            old = store.load(args.shard)
            has_node, old_text = old is not None, describe(old or Checkpoint(args.shard, None, reset_to="-"))
        except SpoutError as exc:  # an unreadable checkpoint is exactly what a reset may be for
            has_node, old_text = True, f"unreadable ({exc})"
        if not has_node and not args.force:  # no checkpoint yet: the shard must exist, or the row is a phantom
            why = unknown_shard(args)
            if why is not None:
                print(f"kinesis-spout: error: not changed: {why}; add --force to write a checkpoint for it anyway",
                      file=sys.stderr)
                return 1
        print(f"{config.checkpoint_path}/{args.shard}: {old_text} -> {describe(new)}")
        if not args.yes:
            print("not changed: add --yes to rewrite it (stop the app first: a running spout's next write would "
                  "win)", file=sys.stderr)
            return 2
        store.save(new.stamped(f"kinesis-spout reset by {getpass.getuser()}@{socket.gethostname()}"), force=True)
    finally:
        store.close()
    print("rewritten: the app resumes this shard from there on its next start")
    return 0
