"""The kazoo errors the library catches, re-exported: the ``zookeeper`` package owns the kazoo dependency, and the
other packages (``checkpoint``, ``coordination``, ``spark``, ``cli``) import these names from here, never from
kazoo (a test of the house, ``tests/unit/tooling/test_kazoo_imports.py``, fails on a kazoo import elsewhere).

Who imports it: the stores built on a :class:`~kinesis_spout.zookeeper.session.ZooKeeperSession` (checkpoints,
leases, Spark's batch store and ownership) and the CLI, inside the functions that catch them, so that importing
those modules does not load kazoo. Nothing is translated: these are kazoo's own classes.
"""

from __future__ import annotations

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

__all__ = ["BadVersionError", "ConnectionLoss", "KazooTimeoutError", "NoNodeError", "NodeExistsError",
           "RolledBackError", "SessionExpiredError"]
