"""``kinesis-spout dev-servers`` and ``kinesis-spout install-emulators``: local servers for trying the examples.

- ``dev-servers``: ZooKeeper and kinesalite on local ports with a stream created; prints the ``export`` lines that
  point the examples at them; Ctrl-C or SIGTERM stops both.
- ``install-emulators [--dir DIR]``: installs kinesalite and kinesis-local with npm into the user cache, where the
  test fixtures find them (see ``kinesis_spout.testing.emulators``).
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from kinesis_spout.cli.common import EMULATOR_AWS_ENV, ENDPOINT_ENV, STREAM_ENV, ZOOKEEPER_ENV
from kinesis_spout.errors import ConfigError, ServerStartError


def register(sub: Any) -> None:
    """Add the ``dev-servers`` and ``install-emulators`` sub-parsers. Who calls: ``cli.parser.build_parser``."""
    dev = sub.add_parser("dev-servers", help="run ZooKeeper and kinesalite locally, with a stream, until Ctrl-C",
                         description="Starts a private ZooKeeper and kinesalite (in memory: their data is gone "
                                     "when they stop), creates a stream and prints the export lines for the "
                                     "examples. Ctrl-C or SIGTERM stops both.")
    dev.add_argument("--zookeeper-port", type=int, default=2181, help="0 = a free port (default 2181)")
    dev.add_argument("--kinesis-port", type=int, default=4567, help="0 = a free port (default 4567)")
    dev.add_argument("--stream", default="sentences", help="stream to create (default sentences)")
    dev.add_argument("--shards", type=int, default=2, help="its shard count (default 2)")
    dev.add_argument("--env-file", type=Path, help="also write the export lines to this file (for `source`)")
    dev.set_defaults(run=run_dev_servers)
    inst = sub.add_parser("install-emulators", help="install kinesalite and kinesis-local with npm for the "
                                                    "test fixtures")
    inst.add_argument("--dir", type=Path, default=None,
                      help="node_modules folder to install into (default: the user cache, found without settings)")
    inst.set_defaults(run=run_install_emulators)


def check_port_free(port: int, what: str, flag: str) -> None:
    """Refuse a taken port before starting anything (0 means a free port: nothing to check)."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise ServerStartError(f"port {port} for {what} is taken ({exc.strerror}): stop what listens there, "
                                   f"or pass {flag} 0 for a free port") from exc


def run_dev_servers(args: argparse.Namespace) -> int:
    """Run ZooKeeper and kinesalite until SIGINT/SIGTERM (handlers need the main thread) or until one dies."""
    import contextlib
    import shlex

    from kinesis_spout.testing.emulators import KinesaliteServer
    from kinesis_spout.testing.kinesis import kinesis_client, wait_for_stream
    from kinesis_spout.testing.process import free_port
    from kinesis_spout.testing.zookeeper import ZooKeeperServer

    if args.shards < 1:
        raise ConfigError(f"--shards must be at least 1, got {args.shards}")
    check_port_free(args.zookeeper_port, "ZooKeeper", "--zookeeper-port")
    check_port_free(args.kinesis_port, "kinesalite", "--kinesis-port")
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


def run_install_emulators(args: argparse.Namespace) -> int:
    """Install kinesalite and kinesis-local with npm (into ``--dir`` or the user cache)."""
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
