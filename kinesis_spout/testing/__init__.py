"""Real local servers for tests and demos: ZooKeeper, moto's Kinesis server and Kinesis emulators.

The pytest fixtures in :mod:`kinesis_spout.testing.plugin` are registered as a pytest plugin when the package is
installed, so users' own tests get ``zookeeper``, ``moto_kinesis``, ``kinesalite``, ``kinesis_local``,
``kinesis_backend``, ``redis``, ``memcached`` and ``spark`` without importing anything. The server classes can
be used directly as well::

    from kinesis_spout.testing import ZooKeeperServer
    with ZooKeeperServer() as zk:
        print(zk.hosts)
"""

from kinesis_spout.testing.emulators import KinesaliteServer, KinesisLocalServer
from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records, wait_for_stream
from kinesis_spout.testing.memcached import MemcachedServer
from kinesis_spout.testing.moto_server import MotoKinesisServer
from kinesis_spout.testing.redis import RedisServer
from kinesis_spout.testing.spout import drain
from kinesis_spout.testing.zookeeper import ZooKeeperServer

__all__ = [
    "KinesaliteServer",
    "KinesisEndpoint",
    "KinesisLocalServer",
    "MemcachedServer",
    "MotoKinesisServer",
    "RedisServer",
    "ZooKeeperServer",
    "drain",
    "put_records",
    "wait_for_stream",
]
