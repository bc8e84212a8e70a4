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

from typing import TYPE_CHECKING, Any

from kinesis_spout import lazy_names

if TYPE_CHECKING:  # the names below, for type checkers and IDEs; at run time they are loaded on first use
    from kinesis_spout.testing.checkpoints import SHARD_END, StoredCheckpoint, stored_checkpoints
    from kinesis_spout.testing.crash import CrashPoint, CrashRun, kill_at
    from kinesis_spout.testing.emulators import KinesaliteServer, KinesisLocalServer
    from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records, wait_for_stream
    from kinesis_spout.testing.memcached import MemcachedServer
    from kinesis_spout.testing.moto_server import MotoKinesisServer
    from kinesis_spout.testing.redis import RedisServer
    from kinesis_spout.testing.spout import drain
    from kinesis_spout.testing.zookeeper import ZooKeeperServer

#: Where each public name lives. Importing the package (as pytest does for every run in a venv where kinesis_spout
#: is installed, through the plugin :mod:`kinesis_spout.testing.plugin`) loads none of them: the spout, boto3 and
#: the ZooKeeper client are loaded by the first test that uses them, not by every pytest start (PEP 562).
_WHERE: dict[str, str] = {
    "SHARD_END": "kinesis_spout.testing.checkpoints",
    "StoredCheckpoint": "kinesis_spout.testing.checkpoints",
    "stored_checkpoints": "kinesis_spout.testing.checkpoints",
    "CrashPoint": "kinesis_spout.testing.crash",
    "CrashRun": "kinesis_spout.testing.crash",
    "kill_at": "kinesis_spout.testing.crash",
    "KinesaliteServer": "kinesis_spout.testing.emulators",
    "KinesisLocalServer": "kinesis_spout.testing.emulators",
    "KinesisEndpoint": "kinesis_spout.testing.kinesis",
    "put_records": "kinesis_spout.testing.kinesis",
    "wait_for_stream": "kinesis_spout.testing.kinesis",
    "MemcachedServer": "kinesis_spout.testing.memcached",
    "MotoKinesisServer": "kinesis_spout.testing.moto_server",
    "RedisServer": "kinesis_spout.testing.redis",
    "drain": "kinesis_spout.testing.spout",
    "ZooKeeperServer": "kinesis_spout.testing.zookeeper",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept in the package's namespace
    (:func:`kinesis_spout.lazy_names.load`). Called by Python for a name the package does not hold yet (PEP 562)."""
    return lazy_names.load(globals(), _WHERE, name)


def __dir__() -> list[str]:
    """The package's names and its public names not loaded yet, for ``dir()`` and completion."""
    return lazy_names.names(globals(), _WHERE)


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
