"""The library's ZooKeeper errors: what a request of a :class:`~kinesis_spout.zookeeper.session.ZooKeeperSession`
raises (or returns, for a transaction's operations and pipelined reads) when ZooKeeper answered with an error its
caller decides about. The session translates kazoo's errors into these at the boundary, so the other packages
(``checkpoint``, ``coordination``, ``spark``, ``cli``) catch the library's types and never name a kazoo class (a test
of the house, ``tests/unit/tooling/test_kazoo_errors.py``, fails when one does). No kazoo import here: importing
this module (at the top of the modules that catch these) does not load kazoo.

Connection trouble on the session's bounded calls is still a retriable ``CheckpointError`` (the session tries again
first); these are answers about the nodes. Every error a session hands out is also an instance of the kazoo class it
translates (:mod:`kinesis_spout.zookeeper.translation`), so code that catches kazoo's own classes keeps working.
"""

from __future__ import annotations

from kinesis_spout.errors import SpoutError

__all__ = ["BadVersionError", "NoAnswerError", "NoNodeError", "NodeExistsError", "RolledBackError", "ZooKeeperError"]


class ZooKeeperError(SpoutError):
    """ZooKeeper refused a request of a session (an error answer of the server, e.g. a node that is not empty).
    The message is kazoo's text (often empty: the class names the answer); the subclasses below are the answers the
    stores act on."""


class NoNodeError(ZooKeeperError):
    """The node (or its parent, for a create) does not exist."""


class NodeExistsError(ZooKeeperError):
    """The node to create exists already."""


class BadVersionError(ZooKeeperError):
    """The node is not at the version the request was conditioned on: another writer changed it meanwhile."""


class RolledBackError(ZooKeeperError):
    """An operation of a transaction that was not applied because another operation of the transaction failed."""


class NoAnswerError(ZooKeeperError):
    """A request sent once got no answer (the connection was lost, the session expired, or the wait timed out):
    whether ZooKeeper applied it is unknown. Raised by ``ZooKeeperSession.delete_once`` (the bounded calls try
    again instead, then raise a retriable ``CheckpointError``)."""

    retriable = True
