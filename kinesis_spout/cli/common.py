"""What the command groups of ``kinesis-spout`` share: the environment variables, the ZooKeeper arguments of the
commands that read an app's nodes, the config and store they build from them, and the table printer.

Who calls: the group modules (``checkpoints``, ``status``, ...) when they register their arguments and when they run.
Nothing here keeps state between calls.
"""

from __future__ import annotations

import argparse
import difflib
import getpass
import os
import socket
from typing import Any

from kinesis_spout.errors import CheckpointError, ConfigError
from kinesis_spout.positions import AT_TIMESTAMP_NAME

AUTH_ENV = "KINESIS_SPOUT_ZOOKEEPER_AUTH"
ZOOKEEPER_ENV = "KINESIS_SPOUT_ZOOKEEPER"
ENDPOINT_ENV = "KINESIS_SPOUT_ENDPOINT_URL"
STREAM_ENV = "KINESIS_SPOUT_STREAM"
APP_ENV = "KINESIS_SPOUT_APP"
#: What ``dev-servers`` exports besides the servers: the emulator accepts any credentials, boto3 needs some.
EMULATOR_AWS_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


def add_zookeeper_arguments(parser: argparse.ArgumentParser, *, app_found: bool = False) -> None:
    """``--stream``, ``--app``, ``--zookeeper``, ``--prefix`` and ``--timeout`` of a command that reads an app's nodes;
    the first three default to ``$KINESIS_SPOUT_STREAM``, ``$KINESIS_SPOUT_APP`` and ``$KINESIS_SPOUT_ZOOKEEPER``
    (read when the parser is built). ``app_found``: the command finds the app when neither is given (see
    :func:`only_app`), so only the stream is required. Who calls: ``register`` of the ``checkpoints`` and ``status``
    groups."""
    parser.add_argument("--stream", default=os.environ.get(STREAM_ENV) or None,
                        help=f"the stream (default ${STREAM_ENV})")
    found = ", else the only app of the stream under the ZooKeeper root" if app_found else ""
    parser.add_argument("--app", default=os.environ.get(APP_ENV) or None,
                        help=f"the app name (default ${APP_ENV}{found})")
    parser.add_argument("--zookeeper", default=os.environ.get(ZOOKEEPER_ENV) or "127.0.0.1:2181",
                        help=f"ZooKeeper HOST:PORT[,...] (default ${ZOOKEEPER_ENV}, else 127.0.0.1:2181)")
    parser.add_argument("--prefix", default="/kinesis_spout", help="zookeeper_prefix of the app")
    parser.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for ZooKeeper (default 15)")
    required = (("stream", STREAM_ENV),) if app_found else (("stream", STREAM_ENV), ("app", APP_ENV))
    parser.set_defaults(required_from_env=required, usage_error=parser.error)


def add_kinesis_arguments(parser: argparse.ArgumentParser, *, used_for: str = "") -> None:
    """``--endpoint-url`` (default ``$KINESIS_SPOUT_ENDPOINT_URL``, read when the parser is built; none: AWS) and
    ``--region`` of a command that calls Kinesis; ``used_for`` says what for in their help (``"reset: "``...). Who
    calls: ``register`` of the ``checkpoints``, ``consumers``, ``dead-letters`` and ``status`` groups."""
    parser.add_argument("--endpoint-url", default=os.environ.get(ENDPOINT_ENV),
                        help=f"{used_for}Kinesis endpoint (default ${ENDPOINT_ENV}; none: AWS)")
    parser.add_argument("--region", default=None, help=f"{used_for}AWS region of the stream")


def owner_stamp() -> str:
    """What a checkpoint rewritten by the command line says its owner is: who reset it, where."""
    return f"kinesis-spout reset by {getpass.getuser()}@{socket.gethostname()}"


def missing_from_env(args: argparse.Namespace) -> str | None:
    """What is missing among the arguments a group takes from flags or the environment (None: nothing), as the
    parser's error text. Who calls: ``kinesis_spout.cli.parser.main``, after parsing."""
    missing = [f"--{name} (or ${variable})" for name, variable in getattr(args, "required_from_env", ())
               if not getattr(args, name, None)]
    return f"the following arguments are required: {', '.join(missing)}" if missing else None


def spout_config(args: argparse.Namespace, app: str | None = None) -> Any:
    """The app's ``SpoutConfig`` from the parsed arguments (credentials from ``$KINESIS_SPOUT_ZOOKEEPER_AUTH``);
    ``app`` stands for ``--app`` where it is not given."""
    from kinesis_spout.config import SpoutConfig

    return SpoutConfig(stream_name=args.stream, app_name=app or args.app, zookeeper=args.zookeeper,
                       zookeeper_prefix=args.prefix, zookeeper_auth=os.environ.get(AUTH_ENV) or None,
                       zookeeper_tls=args.tls or bool(args.tls_ca or args.tls_cert), zookeeper_tls_ca_file=args.tls_ca,
                       zookeeper_tls_cert_file=args.tls_cert, zookeeper_tls_key_file=args.tls_key,
                       zookeeper_deadline_s=args.timeout)


def open_store(args: argparse.Namespace, config: Any) -> Any:
    """The app's checkpoint store, opened; a ZooKeeper that does not answer is reported with the CLI's flag.
    The caller closes it."""
    from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

    store = ZooKeeperCheckpointStore.from_config(config)
    try:
        store.open()
    except CheckpointError as exc:
        if not exc.retriable:  # not a connection time-out: the store's own message says what is wrong
            raise
        tls = " over TLS (check --tls-ca, --tls-cert and --tls-key)" if config.zk.tls else ""
        raise CheckpointError(f"cannot connect to ZooKeeper at {config.zk.hosts}{tls} within {args.timeout:g} s: is "
                              f"it running and reachable? (pass --zookeeper HOST:PORT or set ${ZOOKEEPER_ENV}; "
                              f"--timeout SECONDS waits longer)", retriable=True) from exc
    return store


def check_app_and_stream(store: Any, config: Any) -> None:
    """Refuse an ``--app`` (or ``--stream``) that has no node under the ZooKeeper root while others have: a typo,
    which would otherwise show an empty table (or, for a reset, write under a new name). The ``ConfigError`` lists
    the names there and the nearest one. Nothing under the root at all is no error (no app has run yet).
    Who calls: the ``checkpoints`` and ``status`` commands, on their opened store (reads only)."""
    def children(path: str) -> list[str]:
        return _children(store, path)

    root = config.checkpoint_path.rsplit("/", 3)[0]
    apps = children(root or "/")
    if apps and config.app_name not in apps:
        raise ConfigError(f"no app {config.app_name!r} under {root or '/'} on ZooKeeper {config.zk.hosts}"
                          f"{_nearest(config.app_name, apps)}; apps there: {', '.join(apps)} (pass --app NAME or set "
                          f"${APP_ENV}; --prefix and --zookeeper say where to look)")
    streams = children(f"{root}/{config.app_name}")
    if streams and config.stream_name not in streams:
        raise ConfigError(f"app {config.app_name!r} has nothing of stream {config.stream_name!r} under "
                          f"{root}/{config.app_name}{_nearest(config.stream_name, streams)}; its streams: "
                          f"{', '.join(streams)} (pass --stream NAME or set ${STREAM_ENV})")


def only_app(args: argparse.Namespace) -> str:
    """The app to show when ``--app`` (and ``$KINESIS_SPOUT_APP``) is not given: the only one under the ZooKeeper
    root that has a node of ``--stream``. Otherwise a ``ConfigError`` lists the apps found (with their streams when
    none has this one) and says to pass ``--app``. Who calls: ``status``, before it opens the app's store (reads
    only, on a session of its own)."""
    config = spout_config(args, app="-")
    root = config.checkpoint_path.rsplit("/", 3)[0]
    store = open_store(args, config)
    try:
        streams = {app: _children(store, f"{root}/{app}") for app in _children(store, root or "/")}
    finally:
        store.close()
    readers = [app for app, names in streams.items() if args.stream in names]
    if len(readers) == 1:
        return readers[0]
    where = f"under {root or '/'} on ZooKeeper {config.zk.hosts}"
    choose = f"pass --app NAME or set ${APP_ENV}"
    if readers:
        raise ConfigError(f"{len(readers)} apps read stream {args.stream!r} {where}: {', '.join(readers)}; {choose} "
                          f"to choose one")
    if not streams:
        raise ConfigError(f"no app {where} (none has run there yet, or --prefix and --zookeeper point elsewhere): "
                          f"{choose}")
    found = ", ".join(f"{app} ({', '.join(names) or 'no stream'})" for app, names in streams.items())
    raise ConfigError(f"no app {where} has stream {args.stream!r}; apps there (and their streams): {found}. Pass "
                      f"--stream NAME (or set ${STREAM_ENV}) and --app NAME (or set ${APP_ENV})")


def _children(store: Any, path: str) -> list[str]:
    """The sorted children of a ZooKeeper node of the store's session (none when the node does not exist)."""
    from kinesis_spout.zookeeper.errors import NoNodeError

    try:
        return sorted(store.session.get_children(path))
    except NoNodeError:
        return []


def _nearest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def describe(cp: Any) -> str:
    """A checkpoint as one table cell: its sequence number (``SEQ:SUB`` inside an aggregate), its reset or ``-``."""
    if cp.reset_to == AT_TIMESTAMP_NAME and cp.timestamp is not None:
        return f"(start at {cp.timestamp.isoformat(timespec='milliseconds')})"
    if cp.reset_to:
        return f"(reset to {cp.reset_to})"
    if cp.sequence_number is None:
        return "-"
    return cp.sequence_number + (f":{cp.sub_sequence_number}" if cp.sub_sequence_number else "")


def print_table(rows: list[tuple[str, ...]]) -> None:
    """Print rows (the first is the header) in aligned columns; the last column is not padded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])
