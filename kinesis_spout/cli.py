"""The ``kinesis-spout`` command.

- ``kinesis-spout demo``: the word count on embedded servers (see ``kinesis_spout.demo``).
- ``kinesis-spout checkpoints --stream S --app A``: a table of the app's checkpoints of the stream.
- ``kinesis-spout checkpoints reset --stream S --app A --shard ID --to {trim-horizon,latest,SEQ[:SUB]} --yes``: rewrite
  one shard's checkpoint (it may move backwards: that is the point). Stop the app first, or its next write wins.
  A shard without a checkpoint must be listed by Kinesis (``--endpoint-url``, ``--region``), unless ``--force``.
- ``kinesis-spout status --stream S --app A [--endpoint-url URL --region R]``: per shard its lease owner and epoch,
  checkpoint, parents and whether it is open, closed or finished; and the live workers.
- ``kinesis-spout dev-servers``: ZooKeeper and kinesalite on local ports with a stream created; prints the
  ``export`` lines that point the examples at them; Ctrl-C or SIGTERM stops both.
- ``kinesis-spout dead-letters {list,replay} FILE|stream:NAME``: see ``kinesis_spout.deadletters.replay``.
- ``kinesis-spout install-emulators [--dir DIR]``: installs kinesalite and kinesis-local with npm into the user
  cache, where the test fixtures find them (see ``kinesis_spout.testing.emulators``).

ZooKeeper digest credentials come from the ``KINESIS_SPOUT_ZOOKEEPER_AUTH`` environment variable
(``user:password``), never from the command line, where other users could see them.
"""

from __future__ import annotations

import argparse
import getpass
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from kinesis_spout.errors import CheckpointError, ConfigError, ServerStartError, SpoutError
from kinesis_spout.positions import AT_TIMESTAMP_NAME, LATEST, TRIM_HORIZON, Position, after

AUTH_ENV = "KINESIS_SPOUT_ZOOKEEPER_AUTH"
ZOOKEEPER_ENV = "KINESIS_SPOUT_ZOOKEEPER"
ENDPOINT_ENV = "KINESIS_SPOUT_ENDPOINT_URL"
STREAM_ENV = "KINESIS_SPOUT_STREAM"
#: What ``dev-servers`` exports besides the servers: the emulator accepts any credentials, boto3 needs some.
EMULATOR_AWS_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


def _config(args: argparse.Namespace) -> Any:
    from kinesis_spout.config import SpoutConfig

    return SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=args.zookeeper,
                       zookeeper_prefix=args.prefix, zookeeper_auth=os.environ.get(AUTH_ENV) or None,
                       zookeeper_tls=args.tls or bool(args.tls_ca or args.tls_cert), zookeeper_tls_ca_file=args.tls_ca,
                       zookeeper_tls_cert_file=args.tls_cert, zookeeper_tls_key_file=args.tls_key,
                       zookeeper_deadline_s=args.timeout)


def _open_store(args: argparse.Namespace, config: Any) -> Any:
    """The app's checkpoint store, opened; a ZooKeeper that does not answer is reported with the CLI's flag."""
    from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

    store = ZooKeeperCheckpointStore.from_config(config)
    try:
        store.open()
    except CheckpointError as exc:
        if not exc.retriable:  # not a connection time-out: the store's own message says what is wrong
            raise
        tls = " over TLS (check --tls-ca, --tls-cert and --tls-key)" if config.zookeeper_tls else ""
        raise CheckpointError(f"cannot connect to ZooKeeper at {config.zookeeper}{tls} within {args.timeout:g} s: is "
                              f"it running and reachable? (pass --zookeeper HOST:PORT or set ${ZOOKEEPER_ENV}; "
                              f"--timeout SECONDS waits longer)", retriable=True) from exc
    return store


def _describe(cp: Any) -> str:
    if cp.reset_to == AT_TIMESTAMP_NAME and cp.timestamp is not None:
        return f"(start at {cp.timestamp.isoformat(timespec='milliseconds')})"
    if cp.reset_to:
        return f"(reset to {cp.reset_to})"
    if cp.sequence_number is None:
        return "-"
    return cp.sequence_number + (f":{cp.sub_sequence_number}" if cp.sub_sequence_number else "")


def _list(args: argparse.Namespace) -> int:
    from kinesis_spout.spark.batch_store import ZooKeeperBatchStore

    config = _config(args)
    store = _open_store(args, config)
    try:
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
        rows.append((shard_id, _describe(cp), str(cp.shard_end).lower(), cp.owner or "-",
                     cp.updated_at.isoformat(timespec="seconds") if cp.updated_at else "-"))
    _table(rows)
    return 0


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])


def _status(args: argparse.Namespace) -> int:
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
    store = _open_store(args, config)
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


def _target(raw: str) -> Position:
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


def _unknown_shard(args: argparse.Namespace) -> str | None:
    """Why ``--shard`` is not a shard of the stream (None when Kinesis lists it). Who calls: ``_reset``, for a shard
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


def _reset(args: argparse.Namespace) -> int:
    from kinesis_spout.checkpoint.base import Checkpoint

    if not args.shard or not args.to:
        raise ConfigError("checkpoints reset needs --shard ID and --to {trim-horizon,latest,SEQUENCE_NUMBER}")
    position = _target(args.to)
    config = _config(args)
    new = Checkpoint.at(args.shard, position)
    store = _open_store(args, config)
    try:
        try:
            old = store.load(args.shard)
            has_node, old_text = old is not None, _describe(old or Checkpoint(args.shard, None, reset_to="-"))
        except SpoutError as exc:  # an unreadable checkpoint is exactly what a reset may be for
            has_node, old_text = True, f"unreadable ({exc})"
        if not has_node and not args.force:  # no checkpoint yet: the shard must exist, or the row is a phantom
            why = _unknown_shard(args)
            if why is not None:
                print(f"kinesis-spout: error: not changed: {why}; add --force to write a checkpoint for it anyway",
                      file=sys.stderr)
                return 1
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
    cps.add_argument("--zookeeper", default=os.environ.get(ZOOKEEPER_ENV, "127.0.0.1:2181"))
    cps.add_argument("--prefix", default="/kinesis_spout", help="zookeeper_prefix of the app")
    cps.add_argument("--shard", help="reset: the shard id")
    cps.add_argument("--to", help="reset: trim-horizon, latest, or a sequence number to resume after")
    cps.add_argument("--yes", action="store_true", help="reset: really rewrite the checkpoint")
    cps.add_argument("--force", action="store_true",
                     help="reset: write a checkpoint also for a shard that neither has one nor is listed by Kinesis")
    cps.add_argument("--endpoint-url", default=os.environ.get(ENDPOINT_ENV),
                     help="reset: Kinesis endpoint, to check that a shard without a checkpoint exists")
    cps.add_argument("--region", default=None, help="reset: AWS region of the stream")
    cps.add_argument("--tls", action="store_true", help="connect to ZooKeeper over TLS")
    cps.add_argument("--tls-ca", help="PEM file of the CA that signed ZooKeeper's certificate")
    cps.add_argument("--tls-cert", help="PEM client certificate (with --tls-key)")
    cps.add_argument("--tls-key", help="PEM key of the client certificate")
    cps.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for ZooKeeper (default 15)")
    status = sub.add_parser("status", help="shards with their lease owners, epochs, checkpoints and lineage; live "
                                           "workers", description=f"ZooKeeper credentials: ${AUTH_ENV}.")
    status.add_argument("--stream", required=True)
    status.add_argument("--app", required=True)
    status.add_argument("--zookeeper", default=os.environ.get(ZOOKEEPER_ENV, "127.0.0.1:2181"))
    status.add_argument("--prefix", default="/kinesis_spout", help="zookeeper_prefix of the app")
    status.add_argument("--endpoint-url", default=os.environ.get(ENDPOINT_ENV),
                        help="Kinesis endpoint (for open/closed and parents)")
    status.add_argument("--region", default=None, help="AWS region of the stream")
    for name in ("tls", "tls_ca", "tls_cert", "tls_key"):
        status.set_defaults(**{name: None if name != "tls" else False})
    status.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for ZooKeeper (default 15)")
    dev = sub.add_parser("dev-servers", help="run ZooKeeper and kinesalite locally, with a stream, until Ctrl-C",
                         description="Starts a private ZooKeeper and kinesalite (in memory: their data is gone "
                                     "when they stop), creates a stream and prints the export lines for the "
                                     "examples. Ctrl-C or SIGTERM stops both.")
    dev.add_argument("--zookeeper-port", type=int, default=2181, help="0 = a free port (default 2181)")
    dev.add_argument("--kinesis-port", type=int, default=4567, help="0 = a free port (default 4567)")
    dev.add_argument("--stream", default="sentences", help="stream to create (default sentences)")
    dev.add_argument("--shards", type=int, default=2, help="its shard count (default 2)")
    dev.add_argument("--env-file", type=Path, help="also write the export lines to this file (for `source`)")
    inst = sub.add_parser("install-emulators", help="install kinesalite and kinesis-local with npm for the "
                                                    "test fixtures")
    inst.add_argument("--dir", type=Path, default=None,
                      help="node_modules folder to install into (default: the user cache, found without settings)")
    dl = sub.add_parser("dead-letters", help="count dead letters, or put them back onto a stream (at least once)")
    dl.add_argument("action", choices=["list", "replay"])
    dl.add_argument("source", help="a JSON Lines file of dead letters, or stream:NAME for a dead-letter stream")
    dl.add_argument("--to-stream", help="replay onto this stream (default: each letter's own stream)")
    dl.add_argument("--journal", help="positions replayed: skipped, then added to (default SOURCE.replayed)")
    dl.add_argument("--no-journal", action="store_true", help="replay every letter and keep no journal")
    dl.add_argument("--endpoint-url", default=os.environ.get(ENDPOINT_ENV))
    dl.add_argument("--region")
    return parser


def _dead_letters(args: argparse.Namespace) -> int:
    from kinesis_spout.deadletters import replay

    letters = replay.load_letters(args.source, region=args.region, endpoint_url=args.endpoint_url)
    if args.action == "list":
        for shard, reason, n in replay.count_letters(letters):
            print(f"{n:>8}  {shard}  {reason}")
        print(f"{len(letters):>8}  letters in all")
        return 0
    journal = None if args.no_journal else args.journal or replay.journal_of(args.source)
    done = replay.replay_to_kinesis(letters, args.to_stream, journal, args.region, args.endpoint_url)
    print(f"put {done.put} records" + (f"; skipped {done.skipped} already in {journal}" if journal else ""))
    return 0


def _check_port_free(port: int, what: str, flag: str) -> None:
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise ServerStartError(f"port {port} for {what} is taken ({exc.strerror}): stop what listens there, "
                                   f"or pass {flag} 0 for a free port") from exc


def _dev_servers(args: argparse.Namespace) -> int:
    """Run ZooKeeper and kinesalite until SIGINT/SIGTERM (handlers need the main thread) or until one dies."""
    import contextlib
    import shlex

    from kinesis_spout.testing.emulators import KinesaliteServer
    from kinesis_spout.testing.kinesis import kinesis_client, wait_for_stream
    from kinesis_spout.testing.process import free_port
    from kinesis_spout.testing.zookeeper import ZooKeeperServer

    if args.shards < 1:
        raise ConfigError(f"--shards must be at least 1, got {args.shards}")
    _check_port_free(args.zookeeper_port, "ZooKeeper", "--zookeeper-port")
    _check_port_free(args.kinesis_port, "kinesalite", "--kinesis-port")
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    with contextlib.ExitStack() as servers:
        zk = servers.enter_context(ZooKeeperServer(port=args.zookeeper_port or free_port()))
        kinesis = servers.enter_context(KinesaliteServer(port=args.kinesis_port or free_port()))
        client = kinesis_client(kinesis.endpoint_url, EMULATOR_AWS_ENV["AWS_DEFAULT_REGION"])
        client.create_stream(StreamName=args.stream, ShardCount=args.shards)
        wait_for_stream(client, args.stream)
        exports = {ZOOKEEPER_ENV: zk.hosts, ENDPOINT_ENV: kinesis.endpoint_url, STREAM_ENV: args.stream,
                   **EMULATOR_AWS_ENV}
        lines = [f"export {name}={shlex.quote(value)}" for name, value in exports.items()]
        if args.env_file is not None:
            args.env_file.write_text("\n".join(lines) + "\n")
        print(f"# ZooKeeper at {zk.hosts}, kinesalite at {kinesis.endpoint_url}, stream {args.stream!r} with "
              f"{args.shards} shard(s). The emulator accepts any credentials: the AWS_* lines only give boto3 some.")
        print("# Paste these lines into another shell" + (f" (or: source {args.env_file})" if args.env_file else "")
              + ":")
        print("\n".join(lines))
        print("# Ctrl-C stops both servers (their data lives in memory and a temporary folder, and goes with them).",
              flush=True)
        while not stop.wait(0.5):
            dead = [name for name, server in (("ZooKeeper", zk), ("kinesalite", kinesis)) if not server.running]
            if dead and not stop.is_set():
                print(f"kinesis-spout: error: {' and '.join(dead)} stopped on its own; stopping the rest",
                      file=sys.stderr)
                return 1
        print(f"# {received[0] if received else 'stop'}: stopping ZooKeeper and kinesalite", flush=True)
    return 0


def _install_emulators(args: argparse.Namespace) -> int:
    from kinesis_spout.testing.emulators import NODE_MODULES_ENV, install_emulators, user_node_modules

    target = args.dir.expanduser().resolve() if args.dir is not None else None
    print(f"installing kinesalite and kinesis-local with npm into {target or user_node_modules()} ...", flush=True)
    node_modules = install_emulators(target)
    print(f"installed into {node_modules}")
    if target is not None and target != user_node_modules():
        print(f"the fixtures look there when you set: export {NODE_MODULES_ENV}={node_modules}")
    else:
        print("the fixtures find them there (unless $KINESIS_SPOUT_NODE_MODULES points elsewhere)")
    return 0


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
        if args.command == "dev-servers":
            return _dev_servers(args)
        if args.command == "dead-letters":
            return _dead_letters(args)
        if args.command == "install-emulators":
            return _install_emulators(args)
        return _reset(args) if args.action == "reset" else _list(args)
    except SpoutError as exc:
        print(f"kinesis-spout: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
