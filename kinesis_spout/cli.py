"""The ``kinesis-spout`` command.

- ``kinesis-spout demo``: the word count on embedded servers (see ``kinesis_spout.demo``).
- ``kinesis-spout checkpoints --stream S --app A``: a table of the app's checkpoints of the stream.
- ``kinesis-spout checkpoints reset --stream S --app A --shard ID --to {trim-horizon,latest,SEQ[:SUB]} --yes``: rewrite
  one shard's checkpoint (it may move backwards: that is the point). Stop the app first, or its next write wins.
- ``kinesis-spout status --stream S --app A [--endpoint-url URL --region R]``: per shard its lease owner and epoch,
  checkpoint, parents and whether it is open, closed or finished; and the live workers.

ZooKeeper digest credentials come from the ``KINESIS_SPOUT_ZOOKEEPER_AUTH`` environment variable
(``user:password``), never from the command line, where other users could see them.
"""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import sys
from typing import Any

from kinesis_spout.errors import ConfigError, SpoutError

AUTH_ENV = "KINESIS_SPOUT_ZOOKEEPER_AUTH"


def _config(args: argparse.Namespace) -> Any:
    from kinesis_spout.config import SpoutConfig

    return SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=args.zookeeper,
                       zookeeper_prefix=args.prefix, zookeeper_auth=os.environ.get(AUTH_ENV) or None,
                       zookeeper_tls=args.tls or bool(args.tls_ca or args.tls_cert), zookeeper_tls_ca_file=args.tls_ca,
                       zookeeper_tls_cert_file=args.tls_cert, zookeeper_tls_key_file=args.tls_key,
                       zookeeper_deadline_s=args.timeout)


def _describe(cp: Any) -> str:
    if cp.reset_to == "AT_TIMESTAMP" and cp.timestamp is not None:
        return f"(start at {cp.timestamp.isoformat(timespec='milliseconds')})"
    if cp.reset_to:
        return f"(reset to {cp.reset_to})"
    if cp.sequence_number is None:
        return "-"
    return cp.sequence_number + (f":{cp.sub_sequence_number}" if cp.sub_sequence_number else "")


def _list(args: argparse.Namespace) -> int:
    from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

    config = _config(args)
    store = ZooKeeperCheckpointStore.from_config(config)
    store.open()
    try:
        checkpoints = store.list()
        batch_id = store.load_batch_id()
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
        rows.append((shard_id, _describe(cp), str(cp.shard_end).lower(), cp.owner or "-",
                     cp.updated_at.isoformat(timespec="seconds") if cp.updated_at else "-"))
    _table(rows)
    return 0


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])


def _status(args: argparse.Namespace) -> int:
    from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore
    from kinesis_spout.coordination.leases import ZooKeeperLeases

    config = _config(args)
    listed: dict[str, Any] = {}
    kinesis_note = ""
    try:
        from kinesis_spout.kinesis.client import make_client
        from kinesis_spout.kinesis.shards import list_shards

        client = make_client(args.region, args.endpoint_url)
        listed = {s.shard_id: s for s in list_shards(client, args.stream)}
    except SpoutError as exc:
        kinesis_note = f"(Kinesis not asked: {exc}; open/closed and parents are not shown)"
    store = ZooKeeperCheckpointStore.from_config(config)
    store.open()
    try:
        leases = ZooKeeperLeases(store, "status")
        checkpoints = store.list()
        workers = leases.workers()
        shard_ids = sorted(set(listed) | set(checkpoints) | set(leases.lease_ids()))
        states = leases.read(shard_ids)
    finally:
        store.close()
    print(f"app {args.app!r} on stream {args.stream!r} at {config.checkpoint_path.rsplit('/', 1)[0]}")
    print(f"live workers: {', '.join(workers) if workers else '(none)'}")
    if kinesis_note:
        print(kinesis_note)
    rows: list[tuple[str, ...]] = [("shard", "state", "parents", "owner", "epoch", "checkpoint")]
    for shard_id in shard_ids:
        cp = checkpoints.get(shard_id)
        shard = listed.get(shard_id)
        if cp is not None and cp.shard_end:
            state = "finished"
        elif shard is None:
            state = "not listed" if listed else "?"
        else:
            state = "closed" if shard.closed else "open"
        owner, epoch = states[shard_id]
        owner_text = owner or "-"
        if owner and owner not in workers:
            owner_text += " (gone)"
        rows.append((shard_id, state, ",".join(shard.parents) if shard and shard.parents else "-", owner_text,
                     str(epoch) if epoch >= 0 else "-", _describe(cp) if cp else "-"))
    _table(rows)
    return 0


def _target(raw: str) -> tuple[str | None, int | None, str | None]:
    """``--to`` as (sequence number, sub-sequence number, reset position)."""
    lowered = raw.strip().lower().replace("_", "-")
    if lowered in ("trim-horizon", "latest"):
        return None, None, lowered.replace("-", "_").upper()
    sequence, _, sub = raw.strip().partition(":")
    if sequence.isdigit() and (not sub or sub.isdigit()):
        return sequence, int(sub) if sub else None, None
    raise ConfigError(f"--to must be trim-horizon, latest, a sequence number (decimal digits), or SEQ:SUB for the "
                      f"user record SUB of a KPL aggregate, got {raw!r}")


def _reset(args: argparse.Namespace) -> int:
    from kinesis_spout.checkpoint.base import Checkpoint
    from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

    if not args.shard or not args.to:
        raise ConfigError("checkpoints reset needs --shard ID and --to {trim-horizon,latest,SEQUENCE_NUMBER}")
    sequence, sub, position = _target(args.to)
    config = _config(args)
    new = Checkpoint(args.shard, sequence, sub, reset_to=position)
    store = ZooKeeperCheckpointStore.from_config(config)
    store.open()
    try:
        try:
            old_text = _describe(store.load(args.shard) or Checkpoint(args.shard, None, reset_to="-"))
        except SpoutError as exc:  # an unreadable checkpoint is exactly what a reset may be for
            old_text = f"unreadable ({exc})"
        print(f"{config.checkpoint_path}/{args.shard}: {old_text} -> {_describe(new)}")
        if not args.yes:
            print("not changed: add --yes to rewrite it (stop the app first: a running spout's next write would "
                  "win)", file=sys.stderr)
            return 2
        store.save(new.stamped(f"kinesis-spout reset by {getpass.getuser()}@{socket.gethostname()}"), force=True)
    finally:
        store.close()
    print("rewritten: the app resumes this shard from there on its next start")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kinesis-spout", description="Read Amazon Kinesis into Spark.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the word-count demo (embedded servers unless told otherwise)",
                   add_help=False)
    cps = sub.add_parser("checkpoints", help="list an app's checkpoints in ZooKeeper, or reset one",
                         description=f"ZooKeeper digest credentials are read from ${AUTH_ENV} (user:password).")
    cps.add_argument("action", nargs="?", choices=["list", "reset"], default="list")
    cps.add_argument("--stream", required=True)
    cps.add_argument("--app", required=True)
    cps.add_argument("--zookeeper", default=os.environ.get("KINESIS_SPOUT_ZOOKEEPER", "127.0.0.1:2181"))
    cps.add_argument("--prefix", default="/kinesis_spout", help="zookeeper_prefix of the app")
    cps.add_argument("--shard", help="reset: the shard id")
    cps.add_argument("--to", help="reset: trim-horizon, latest, or a sequence number to resume after")
    cps.add_argument("--yes", action="store_true", help="reset: really rewrite the checkpoint")
    cps.add_argument("--tls", action="store_true", help="connect to ZooKeeper over TLS")
    cps.add_argument("--tls-ca", help="PEM file of the CA that signed ZooKeeper's certificate")
    cps.add_argument("--tls-cert", help="PEM client certificate (with --tls-key)")
    cps.add_argument("--tls-key", help="PEM key of the client certificate")
    cps.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for ZooKeeper (default 15)")
    status = sub.add_parser("status", help="shards with their lease owners, epochs, checkpoints and lineage; live "
                                           "workers", description=f"ZooKeeper credentials: ${AUTH_ENV}.")
    status.add_argument("--stream", required=True)
    status.add_argument("--app", required=True)
    status.add_argument("--zookeeper", default=os.environ.get("KINESIS_SPOUT_ZOOKEEPER", "127.0.0.1:2181"))
    status.add_argument("--prefix", default="/kinesis_spout", help="zookeeper_prefix of the app")
    status.add_argument("--endpoint-url", default=os.environ.get("KINESIS_SPOUT_ENDPOINT_URL"),
                        help="Kinesis endpoint (for open/closed and parents)")
    status.add_argument("--region", default=None, help="AWS region of the stream")
    for name in ("tls", "tls_ca", "tls_cert", "tls_key"):
        status.set_defaults(**{name: None if name != "tls" else False})
    status.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for ZooKeeper (default 15)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    try:
        if args.command == "demo":
            from kinesis_spout import demo

            return demo.main(rest)
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        if args.command == "status":
            return _status(args)
        return _reset(args) if args.action == "reset" else _list(args)
    except SpoutError as exc:
        print(f"kinesis-spout: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
