"""``kinesis-spout consumers {list,deregister} --stream S [--name N] [--endpoint-url URL --region R]``: the enhanced
fan-out consumers registered on a stream (``retrieval="fanout"`` registers one per app, named ``consumer_name`` or
the app name), and deregistering one that is no longer used (a stream holds at most 20)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from kinesis_spout.cli.common import STREAM_ENV, add_kinesis_arguments, print_table


def register(sub: Any) -> None:
    """Add the ``consumers`` sub-parser. Who calls: ``kinesis_spout.cli.parser.build_parser``."""
    consumers = sub.add_parser("consumers", help="list a stream's enhanced fan-out consumers, or deregister one")
    consumers.add_argument("action", choices=["list", "deregister"])
    consumers.add_argument("--stream", default=os.environ.get(STREAM_ENV) or None,
                           help=f"the stream (default ${STREAM_ENV})")
    consumers.add_argument("--name", help="deregister: the consumer's name (an app's consumer_name, else its app "
                                          "name)")
    add_kinesis_arguments(consumers)
    consumers.set_defaults(run=run, required_from_env=(("stream", STREAM_ENV),), usage_error=consumers.error)


def run(args: argparse.Namespace) -> int:
    """Print the consumers (name, status, ARN), or deregister ``--name``. Returns 1 when there was none to
    deregister."""
    from kinesis_spout.errors import ConfigError
    from kinesis_spout.kinesis.client import make_client
    from kinesis_spout.kinesis.retrieval.consumers import CONSUMER_LIMIT, deregister_consumer, list_consumers

    client = make_client(args.region, args.endpoint_url)
    if args.action == "deregister":
        if not args.name:
            raise ConfigError("consumers deregister needs --name: the consumer to deregister (see consumers list "
                              f"--stream {args.stream})")
        if not deregister_consumer(client, args.stream, args.name):
            print(f"stream {args.stream!r} has no consumer {args.name!r} (see consumers list --stream {args.stream})")
            return 1
        print(f"deregistered consumer {args.name!r} of stream {args.stream!r}; an app reading with "
              f"retrieval='fanout' under this name registers it again when it opens")
        return 0
    found = list_consumers(client, args.stream)
    print(f"stream {args.stream!r}: {len(found)} of {CONSUMER_LIMIT} enhanced fan-out consumers")
    if found:
        print_table([("name", "status", "arn"), *((c.name, c.status, c.arn) for c in found)])
    return 0
