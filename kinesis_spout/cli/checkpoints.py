"""``kinesis-spout checkpoints [list|reset]``: an app's checkpoints of a stream, and the rewrite of one of them.

- ``checkpoints --stream S --app A``: a table of the app's checkpoints of the stream.
- ``checkpoints reset --stream S --app A --shard ID --to {trim-horizon,latest,SEQ[:SUB]} --yes``: rewrite one shard's
  checkpoint (it may move backwards: that is the point). Stop the app first, or its next write wins. A shard without a
  checkpoint must be listed by Kinesis (``--endpoint-url``, ``--region``), unless ``--force``.
- ``checkpoints reset --stream S --app A --all --to {trim-horizon,latest} --yes``: rewrite every stored checkpoint of
  the app's stream (unreadable ones too), to read the stream again from its oldest records or to skip to its tip.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from kinesis_spout.cli.common import (
    AUTH_ENV,
    add_kinesis_arguments,
    add_zookeeper_arguments,
    check_app_and_stream,
    describe,
    open_store,
    owner_stamp,
    print_table,
    spout_config,
)
from kinesis_spout.errors import CheckpointError, ConfigError, SpoutError
from kinesis_spout.positions import LATEST, TRIM_HORIZON, Position, after


def register(sub: Any) -> None:
    """Add the ``checkpoints`` sub-parser. Who calls: ``kinesis_spout.cli.parser.build_parser``."""
    cps = sub.add_parser("checkpoints", help="list an app's checkpoints in ZooKeeper, or reset one",
                         description=f"ZooKeeper digest credentials are read from ${AUTH_ENV} (user:password).")
    cps.add_argument("action", nargs="?", choices=["list", "reset"], default="list")
    add_zookeeper_arguments(cps)
    cps.add_argument("--shard", help="reset: the shard id")
    cps.add_argument("--all", action="store_true",
                     help="reset: every stored checkpoint of the app's stream (with --to trim-horizon or latest)")
    cps.add_argument("--to", help="reset: trim-horizon, latest, or a sequence number to resume after")
    cps.add_argument("--yes", action="store_true", help="reset: really rewrite the checkpoint")
    cps.add_argument("--force", action="store_true",
                     help="reset: write it without the checks (app and stream names in ZooKeeper, the shard and "
                          "the sequence number with Kinesis)")
    add_kinesis_arguments(cps, used_for="reset, to check the shard and the sequence number: ")
    cps.add_argument("--tls", action="store_true", help="connect to ZooKeeper over TLS")
    cps.add_argument("--tls-ca", help="PEM file of the CA that signed ZooKeeper's certificate")
    cps.add_argument("--tls-cert", help="PEM client certificate (with --tls-key)")
    cps.add_argument("--tls-key", help="PEM key of the client certificate")
    cps.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """The ``checkpoints`` command: ``reset`` or the listing."""
    return reset(args) if args.action == "reset" else list_checkpoints(args)


def list_checkpoints(args: argparse.Namespace) -> int:
    """Print the app's checkpoints of the stream and its last Spark batch id (read only). Every shard is shown: an
    unreadable checkpoint with its stored bytes and the reset command that replaces it (then exit 1)."""
    from kinesis_spout.spark.bookkeeping.batch_store import ZooKeeperBatchStore

    config = spout_config(args)
    store = open_store(args, config)
    try:
        check_app_and_stream(store, config)
        checkpoints, unreadable = read_all(store)
        batch_id = ZooKeeperBatchStore.on_store(store).load_batch_id()
    finally:
        store.close()
    print(f"checkpoints of app {args.app!r} on stream {args.stream!r} at {config.checkpoint_path}")
    if batch_id:
        print(f"last batch id: {batch_id}")
    if not checkpoints and not unreadable:
        print("(none)")
        return 0
    rows: list[tuple[str, ...]] = [("shard", "checkpoint", "shard_end", "owner", "updated_at")]
    for shard_id in sorted({*checkpoints, *unreadable}):
        cp = checkpoints.get(shard_id)
        if cp is None:
            rows.append((shard_id, "unreadable", "-", "-", "-"))
            continue
        rows.append((shard_id, describe(cp), str(cp.shard_end).lower(), cp.owner or "-",
                     cp.updated_at.isoformat(timespec="seconds") if cp.updated_at else "-"))
    print_table(rows)
    for shard_id, (why, raw) in sorted(unreadable.items()):
        shown = repr(raw[:300]) + (f" ... ({len(raw)} bytes)" if len(raw) > 300 else "")
        print(f"\nunreadable checkpoint of {shard_id}: {why}\n  stored bytes: {shown}\n  replace it (stop the app "
              f"first; --to latest skips the shard's records, --to SEQUENCE_NUMBER resumes after one):\n"
              f"  {reset_command(args, shard_id)}")
    return 1 if unreadable else 0


def read_all(store: Any) -> tuple[dict[str, Any], dict[str, tuple[str, bytes]]]:
    """Every checkpoint node of the store: the readable ones, and the unreadable ones as (why, stored bytes).
    Who calls: ``list_checkpoints`` (one bad node must not hide the others, as ``store.list()`` would)."""
    from kinesis_spout.zookeeper.errors import NoNodeError

    try:
        shard_ids = sorted(store.session.get_children(store.path))
    except NoNodeError:
        return {}, {}
    readable: dict[str, Any] = {}
    unreadable: dict[str, tuple[str, bytes]] = {}
    for shard_id in shard_ids:
        try:
            cp = store.load(shard_id)
        except CheckpointError as exc:
            cause = exc.__cause__ if isinstance(exc.__cause__, CheckpointError) else exc
            try:
                raw = store.session.get(f"{store.path}/{shard_id}")[0] or b""
            except NoNodeError:
                continue  # deleted meanwhile
            unreadable[shard_id] = (str(cause), raw)
            continue
        if cp is not None:
            readable[shard_id] = cp
    return readable, unreadable


def reset_command(args: argparse.Namespace, shard_id: str, to: str = "trim-horizon") -> str:
    """The complete ``kinesis-spout checkpoints reset`` command line for ``shard_id`` with this run's flags."""
    words = ["kinesis-spout", "checkpoints", "reset", "--stream", args.stream, "--app", args.app, "--zookeeper",
             args.zookeeper, "--prefix", args.prefix]
    for flag in ("tls_ca", "tls_cert", "tls_key"):
        if getattr(args, flag, None):
            words += [f"--{flag.replace('_', '-')}", getattr(args, flag)]
    if getattr(args, "tls", False):
        words.append("--tls")
    words += ["--shard", shard_id, "--to", to, "--yes"]
    return " ".join(shlex.quote(word) for word in words)


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


def foreign_sequence_number(args: argparse.Namespace, sequence: str) -> str | None:
    """Why ``sequence`` is not a sequence number of ``--shard`` (None when the shard has it): Kinesis is asked for a
    shard iterator AT_SEQUENCE_NUMBER, which it refuses for a number of another shard or one it never gave. Who
    calls: ``reset``, before writing, unless ``--force`` (a wrong number would make the app fail at its start)."""
    from kinesis_spout.kinesis.botocore_errors import translate
    from kinesis_spout.kinesis.client import make_client

    try:
        make_client(args.region, args.endpoint_url).get_shard_iterator(
            StreamName=args.stream, ShardId=args.shard, ShardIteratorType="AT_SEQUENCE_NUMBER",
            StartingSequenceNumber=sequence)
    except Exception as exc:  # noqa: BLE001 - every botocore error is mapped by translate
        error = translate(exc, "GetShardIterator AT_SEQUENCE_NUMBER")
        if error.code in ("InvalidArgumentException", "ResourceNotFoundException"):
            return (f"sequence number {sequence!r} is not one of shard {args.shard!r} of stream {args.stream!r} "
                    f"({error}); `kinesis-spout checkpoints` shows the stored ones")
        return (f"cannot check sequence number {sequence!r} with shard {args.shard!r} of stream {args.stream!r}: "
                f"{error} (pass --endpoint-url and --region of the stream)")
    return None


def reset(args: argparse.Namespace) -> int:
    """Rewrite one shard's checkpoint (``--yes``), or print what would change (exit 2)."""
    from kinesis_spout.checkpoint.base import Checkpoint

    if getattr(args, "all", False):
        return reset_all(args)
    if not args.shard or not args.to:
        raise ConfigError("checkpoints reset needs --shard ID (or --all) and --to {trim-horizon,latest,"
                          "SEQUENCE_NUMBER}")
    position = parse_target(args.to)
    config = spout_config(args)
    new = Checkpoint.at(args.shard, position)
    store = open_store(args, config)
    try:
        if not args.force:
            check_app_and_stream(store, config)
        try:
            old = store.load(args.shard)
            has_node, old_text = old is not None, describe(old) if old is not None else "(reset to -)"
        except SpoutError as exc:  # an unreadable checkpoint is exactly what a reset may be for
            has_node, old_text = True, f"unreadable ({exc})"
        if not has_node and not args.force:  # no checkpoint yet: the shard must exist, or the row is a phantom
            why = unknown_shard(args)
            if why is not None:
                print(f"kinesis-spout: error: not changed: {why}; add --force to write a checkpoint for it anyway",
                      file=sys.stderr)
                return 1
        if position.key is not None and not args.force:  # a sequence number: one of the shard's?
            why = foreign_sequence_number(args, args.to.strip().partition(":")[0])
            if why is not None:
                print(f"kinesis-spout: error: not changed: {why}; add --force to write it anyway", file=sys.stderr)
                return 1
        print(f"{config.checkpoint_path}/{args.shard}: {old_text} -> {describe(new)}")
        if not args.yes:
            print("not changed: add --yes to rewrite it (stop the app first: a running spout's next write would "
                  "win)", file=sys.stderr)
            return 2
        store.save(new.stamped(owner_stamp()), force=True)
    finally:
        store.close()
    print("rewritten: the app resumes this shard from there on its next start")
    return 0


def reset_all(args: argparse.Namespace) -> int:
    """``reset --all``: rewrite every checkpoint node of the app's stream (readable or not) to ``--to``
    (trim-horizon or latest: a sequence number belongs to one shard), or print what would change (exit 2).
    Shards without a checkpoint are left alone: they start at the app's initial position anyway."""
    from kinesis_spout.checkpoint.base import Checkpoint

    if args.shard:
        raise ConfigError(f"checkpoints reset takes --shard {args.shard} or --all, not both: --all rewrites every "
                          f"stored checkpoint of the stream")
    position = parse_target(args.to or "")
    if position.key is not None:
        raise ConfigError(f"checkpoints reset --all takes --to trim-horizon or --to latest, got {args.to!r}: a "
                          f"sequence number is one shard's (reset that shard with --shard ID --to {args.to})")
    config = spout_config(args)
    store = open_store(args, config)
    try:
        if not args.force:
            check_app_and_stream(store, config)
        checkpoints, unreadable = read_all(store)
        shard_ids = sorted({*checkpoints, *unreadable})
        if not shard_ids:
            print(f"no checkpoint at {config.checkpoint_path}: nothing to reset (each shard starts at the app's "
                  f"initial position; --shard ID writes one)")
            return 0
        for shard_id in shard_ids:
            old = checkpoints.get(shard_id)
            old_text = describe(old) if old is not None else f"unreadable ({unreadable[shard_id][0]})"
            print(f"{config.checkpoint_path}/{shard_id}: {old_text} -> {describe(Checkpoint.at(shard_id, position))}")
        if not args.yes:
            print(f"not changed: add --yes to rewrite these {len(shard_ids)} checkpoints (stop the app first: a "
                  f"running spout's next write would win)", file=sys.stderr)
            return 2
        owner = owner_stamp()
        for shard_id in shard_ids:
            store.save(Checkpoint.at(shard_id, position).stamped(owner), force=True)
    finally:
        store.close()
    print(f"{len(shard_ids)} checkpoints rewritten: the app resumes each shard from there on its next start")
    return 0
