"""ZooKeeper: one bounded session (kazoo client) shared by the stores built on it, and its security settings."""

from kinesis_spout.zookeeper.security import ZooKeeperSecurity
from kinesis_spout.zookeeper.session import ZooKeeperSession

__all__ = ["ZooKeeperSecurity", "ZooKeeperSession"]
