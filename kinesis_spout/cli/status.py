"""``kinesis-spout status --stream S [--app A] [--endpoint-url URL --region R]``: per shard its lease owner and epoch,
checkpoint, parents, whether it is open, closed or finished, and how far its checkpoint is behind the shard's newest
record (MillisBehindLatest of one ``GetRecords(Limit=1)`` at the checkpoint: :mod:`kinesis_spout.cli.behind`); and the
live workers. Without ``--app`` (nor
``$KINESIS_SPOUT_APP``), the only app of the stream under the ZooKeeper root is shown."""

from __future__ import annotations

import argparse
from typing import Any

from kinesis_spout.cli.behind import behind_latest
from kinesis_spout.cli.common import (
    AUTH_ENV,
    add_kinesis_arguments,
    add_zookeeper_arguments,
    check_app_and_stream,
    describe,
    only_app,
    open_store,
    print_table,
    spout_config,
)
from kinesis_spout.errors import SpoutError


def register(sub: Any) -> None:
    """Add the ``status`` sub-parser. Who calls: ``kinesis_spout.cli.parser.build_parser``."""
    status = sub.add_parser("status", help="shards with their lease owners, epochs, checkpoints, lineage and "
                                           "MillisBehindLatest at the checkpoint; live workers",
                            description=f"ZooKeeper credentials: ${AUTH_ENV}.")
    add_zookeeper_arguments(status, app_found=True)
    add_kinesis_arguments(status, used_for="open/closed and parents: ")
    status.set_defaults(tls=False, tls_ca=None, tls_cert=None, tls_key=None, run=run)


def run(args: argparse.Namespace) -> int:
    """Print the status table (read only: ZooKeeper, and Kinesis's shard list when it answers). Without ``--app``,
    first find the stream's only app (see :func:`~kinesis_spout.cli.common.only_app`)."""
    from kinesis_spout.coordination.leases import ZooKeeperLeases

    chosen = not args.app
    if chosen:
        args.app = only_app(args)
    config = spout_config(args)
    listed: dict[str, Any] = {}
    kinesis_note = ""
    client: Any = None
    try:
        from kinesis_spout.kinesis.client import make_client
        from kinesis_spout.kinesis.shards import list_shards

        client = make_client(args.region, args.endpoint_url)
        listed = {s.shard_id: s for s in list_shards(client, args.stream)}
    except SpoutError as exc:
        kinesis_note = f"(Kinesis not asked: {exc}; open/closed, parents and lag are not shown)"
    store = open_store(args, config)
    try:
        check_app_and_stream(store, config)
        leases = ZooKeeperLeases(store, "status")
        checkpoints = store.list()
        workers = leases.workers()
        shard_ids = sorted(set(listed) | set(checkpoints) | set(leases.lease_ids()))
        states = leases.read(shard_ids)
    finally:
        store.close()
    behind = behind_latest(client, args.stream, sorted(listed), checkpoints) if listed else {}
    print(f"app {args.app!r} on stream {args.stream!r} at {config.checkpoint_path.rsplit('/', 1)[0]}"
          + (f" (the only app of stream {args.stream!r} there; --app NAME shows another)" if chosen else ""))
    print(f"live workers: {', '.join(workers) if workers else '(none)'}")
    if kinesis_note:
        print(kinesis_note)
    rows: list[tuple[str, ...]] = [("shard", "state", "parents", "owner", "epoch", "checkpoint", "behind latest")]
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
                     str(epoch) if epoch >= 0 else "-", describe(cp) if cp else "-", behind.get(shard_id, "-")))
    print_table(rows)
    return 0
