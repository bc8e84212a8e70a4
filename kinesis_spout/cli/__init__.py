"""The ``kinesis-spout`` command (entry point ``kinesis_spout.cli:main``). One module per command group:

- ``demo``: the word count on embedded servers (see ``kinesis_spout.demo``).
- ``checkpoints``: an app's checkpoints of a stream, and ``checkpoints reset`` of one shard's.
- ``status``: per shard its lease owner and epoch, checkpoint, lineage and state; the live workers.
- ``dev_servers``: ``dev-servers`` (ZooKeeper and kinesalite with a stream, until Ctrl-C) and ``install-emulators``.
- ``dead_letters``: ``dead-letters {list,replay}``.
- ``consumers``: ``consumers {list,deregister}``, a stream's enhanced fan-out consumers.

``parser`` builds the parser from the groups' ``register`` functions and holds ``main``; ``common`` holds what the
groups share. ZooKeeper digest credentials come from the ``KINESIS_SPOUT_ZOOKEEPER_AUTH`` environment variable
(``user:password``), never from the command line, where other users could see them.
"""

from __future__ import annotations

from kinesis_spout.cli.common import AUTH_ENV, ENDPOINT_ENV, STREAM_ENV, ZOOKEEPER_ENV
from kinesis_spout.cli.parser import main

__all__ = ["AUTH_ENV", "ENDPOINT_ENV", "STREAM_ENV", "ZOOKEEPER_ENV", "main"]
