"""kazoo's errors translated into the library's (:mod:`kinesis_spout.zookeeper.errors`), at the session's boundary.

Who calls: :class:`~kinesis_spout.zookeeper.session.ZooKeeperSession`, on every error a request raises or returns
(a transaction's operations, pipelined reads), importing this module when it first needs it (kazoo is loaded by then).

For each kazoo error class there is one class here of the same name that subclasses both the library's type (e.g.
:class:`kinesis_spout.zookeeper.errors.NoNodeError`) and kazoo's: the stores catch the library's type, a user's
``except kazoo.exceptions.NoNodeError`` still catches what a session raises, and messages that name the class (``type(
exc).__name__``) read as before. Each is a module attribute under its own name, so it pickles.
"""

from __future__ import annotations

import kazoo.exceptions as kazoo_exceptions
from kazoo.handlers import threading as kazoo_threading

from kinesis_spout.zookeeper import errors

__all__ = ["PERMANENT", "translated"]

#: kazoo's classes -> the library's type they become (the first that matches, subclasses first); others: ZooKeeperError.
_OURS: tuple[tuple[type[BaseException], type[errors.ZooKeeperError]], ...] = (
    (kazoo_exceptions.NoNodeError, errors.NoNodeError),
    (kazoo_exceptions.NodeExistsError, errors.NodeExistsError),
    (kazoo_exceptions.BadVersionError, errors.BadVersionError),
    (kazoo_exceptions.RolledBackError, errors.RolledBackError),
    (kazoo_exceptions.ConnectionLoss, errors.NoAnswerError),
    (kazoo_exceptions.SessionExpiredError, errors.NoAnswerError),
    (kazoo_exceptions.OperationTimeoutError, errors.NoAnswerError),
    (kazoo_exceptions.ConnectionDropped, errors.NoAnswerError),
    (kazoo_threading.KazooTimeoutError, errors.NoAnswerError),
)

_KAZOO: tuple[type[BaseException], ...] = (kazoo_exceptions.KazooException, kazoo_threading.KazooTimeoutError)


def _both(theirs: type[BaseException]) -> type[errors.ZooKeeperError]:
    """The class of this module named after ``theirs``, a subclass of the library's type and of ``theirs``."""
    ours = next((o for k, o in _OURS if issubclass(theirs, k)), errors.ZooKeeperError)
    both = type(theirs.__name__, (ours, theirs), {
        "__module__": __name__, "__doc__": f"kazoo's {theirs.__name__} as the library's {ours.__name__}."})
    globals()[theirs.__name__] = both
    return both


_TRANSLATIONS: dict[type[BaseException], type[errors.ZooKeeperError]] = {
    theirs: _both(theirs) for theirs in [*vars(kazoo_exceptions).values(), kazoo_threading.KazooTimeoutError]
    if isinstance(theirs, type) and issubclass(theirs, _KAZOO)}


def translated(exc: BaseException) -> BaseException:
    """``exc`` as the library's error when it is kazoo's (same text, ``exc`` as its ``__cause__``); any other
    exception (and one translated already) as it is."""
    if isinstance(exc, errors.ZooKeeperError) or not isinstance(exc, _KAZOO):
        return exc
    both = _TRANSLATIONS.get(type(exc)) or _both(type(exc))  # a subclass kazoo defines elsewhere
    out = both(str(exc))
    out.__cause__ = exc
    return out


#: kazoo's errors that no retry can mend (everything else it raises is retriable), with what to do about each.
PERMANENT = {
    "NotEmptyError": "the node has children this library did not write; remove them or use another path",
    "NoChildrenForEphemeralsError": "a node of this path is ephemeral (written by another program?); use another "
                                    "path",
    "InvalidACLError": "the ACL this store sets is invalid for the server; check zookeeper_auth",
    "AuthFailedError": "the server rejected the credentials; check zookeeper_auth",
    "BadArgumentsError": "the server rejected the request's arguments (a node name or a value too large?)",
    "QuotaExceededError": "a quota of the server is exceeded; raise it or delete old nodes under this path",
    "UnimplementedError": "the server does not support this request; check the ZooKeeper version (3.5 or later)",
    "MarshallingError": "the request could not be encoded (a value over the server's jute.maxbuffer?)",
}
