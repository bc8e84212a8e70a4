"""Real local servers for tests and demos: ZooKeeper, moto's Kinesis server and Kinesis emulators.

The pytest fixtures in :mod:`kinesis_spout.testing.plugin` are registered as a pytest plugin when the package is
installed, so users' own tests get ``zookeeper``, ``moto_kinesis``, ``kinesalite``, ``kinesis_local``,
``kinesis_backend``, ``redis``, ``memcached`` and ``spark`` without importing anything. The server classes can
be used directly as well::

    from kinesis_spout.testing import ZooKeeperServer
    with ZooKeeperServer() as zk:
        print(zk.hosts)

For crash-and-resume tests: :func:`kill_at` runs a consumer of yours in a child process and SIGKILLs it right after
the ack you choose (:mod:`kinesis_spout.testing.crash`), and :func:`stored_checkpoints` reads where an app resumes,
per shard (:mod:`kinesis_spout.testing.checkpoints`).
"""

from kinesis_spout.testing.checkpoints import SHARD_END, StoredCheckpoint, stored_checkpoints
from kinesis_spout.testing.crash import CrashPoint, CrashRun, kill_at
from kinesis_spout.testing.emulators import KinesaliteServer, KinesisLocalServer
from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records, wait_for_stream
from kinesis_spout.testing.memcached import MemcachedServer
from kinesis_spout.testing.moto_server import MotoKinesisServer
from kinesis_spout.testing.redis import RedisServer
from kinesis_spout.testing.spout import drain
from kinesis_spout.testing.zookeeper import ZooKeeperServer

__all__ = [
    "SHARD_END",
    "CrashPoint",
    "CrashRun",
    "KinesaliteServer",
    "KinesisEndpoint",
    "KinesisLocalServer",
    "MemcachedServer",
    "MotoKinesisServer",
    "RedisServer",
    "StoredCheckpoint",
    "ZooKeeperServer",
    "drain",
    "kill_at",
    "put_records",
    "stored_checkpoints",
    "wait_for_stream",
]
