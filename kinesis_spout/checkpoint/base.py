"""The checkpoint value, its JSON form, and the CheckpointStore protocol."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kinesis_spout.errors import CheckpointError
from kinesis_spout.positions import (
    RESET_POSITIONS,
    CheckpointFields,
    Position,
    at_timestamp,
    from_checkpoint_fields,
    to_checkpoint_fields,
)
from kinesis_spout.records import SequenceKey

if TYPE_CHECKING:
    from kinesis_spout.zookeeper.session import Listener, ZooKeeperSession

__all__ = ["FORMAT_VERSION", "RESET_POSITIONS", "Checkpoint", "CheckpointStore", "ZooKeeperHome", "zookeeper_home"]

FORMAT_VERSION = 1
# RESET_POSITIONS (from kinesis_spout.positions): the starts a checkpoint can hold instead of a sequence number,
# where a shard in which nothing was consumed yet starts. ``TRIM_HORIZON`` and ``LATEST`` come from an operator's
# reset (``kinesis-spout checkpoints reset``); ``AT_TIMESTAMP`` (with ``timestamp``) is a start pinned by the spout
# or the Spark source before the first record of the shard is delivered, so a crash before the first checkpoint
# resumes at the same place.


@dataclass(frozen=True, slots=True, init=False)
class Checkpoint:
    """A shard's safe checkpoint: the :class:`~kinesis_spout.positions.Position` where its reading resumes (every
    record at or below it is done), who wrote it and when.

    ``position`` is what it holds; the stored fields are read from it (:attr:`sequence_number`,
    :attr:`sub_sequence_number`, :attr:`shard_end`, :attr:`reset_to`, :attr:`timestamp`, by
    :func:`kinesis_spout.positions.to_checkpoint_fields`: the JSON document's fields). Build one with
    :meth:`at` (a position), :meth:`pinned` (a start pinned to a time), or from the stored fields as before:
    ``Checkpoint(shard_id, sequence_number, sub_sequence_number, shard_end, owner, updated_at, reset_to,
    timestamp)``, which a ``CheckpointError`` refuses when they store no position (a ``reset_to`` beside a
    sequence number, nothing at all ...). ``sequence_number`` is None only for a finished shard in which nothing was
    read, or for a shard in which nothing was consumed yet: ``reset_to`` then says where it starts
    (``"TRIM_HORIZON"``, ``"LATEST"``, or ``"AT_TIMESTAMP"`` at ``timestamp``). Such a start is behind every
    checkpoint with a sequence number.
    """

    shard_id: str
    position: Position
    owner: str
    updated_at: datetime | None

    def __init__(self, shard_id: str, sequence_number: str | None = None, sub_sequence_number: int | None = None,
                 shard_end: bool = False, owner: str = "", updated_at: datetime | None = None,
                 reset_to: str | None = None, timestamp: datetime | None = None, *,
                 position: Position | None = None) -> None:
        if position is None:
            position = from_checkpoint_fields(CheckpointFields(sequence_number, sub_sequence_number, shard_end,
                                                               reset_to, timestamp), f"shard {shard_id}")
        elif (sequence_number, sub_sequence_number, shard_end, reset_to, timestamp) != (None, None, False, None, None):
            raise TypeError("Checkpoint takes a position or the fields that store one, not both")
        object.__setattr__(self, "shard_id", shard_id)
        object.__setattr__(self, "position", position)
        object.__setattr__(self, "owner", owner)
        object.__setattr__(self, "updated_at", updated_at)

    @classmethod
    def pinned(cls, shard_id: str, timestamp: datetime) -> "Checkpoint":
        """The start of a shard in which nothing was consumed yet, pinned to records that arrived at ``timestamp``
        or later (how ``LATEST`` and ``AT_TIMESTAMP`` are made durable)."""
        return cls(shard_id, position=at_timestamp(timestamp))

    @classmethod
    def at(cls, shard_id: str, position: Position, owner: str = "", updated_at: datetime | None = None
           ) -> "Checkpoint":
        """The checkpoint of ``shard_id`` that stores ``position``."""
        return cls(shard_id, owner=owner, updated_at=updated_at, position=position)

    @property
    def fields(self) -> CheckpointFields:
        """The stored fields of :attr:`position` (:func:`kinesis_spout.positions.to_checkpoint_fields`)."""
        return to_checkpoint_fields(self.position)

    @property
    def sequence_number(self) -> str | None:
        """The last consumed record's sequence number; None when nothing was consumed."""
        key = self.position.key
        return None if key is None else str(key.sequence)

    @property
    def sub_sequence_number(self) -> int | None:
        """The last consumed user record inside a KPL aggregate; None after a whole Kinesis record."""
        return self.fields.sub_sequence_number

    @property
    def shard_end(self) -> bool:
        """True for a finished shard."""
        return self.position.ended

    @property
    def reset_to(self) -> str | None:
        """Where a shard in which nothing was consumed starts: ``"TRIM_HORIZON"``, ``"LATEST"``, ``"AT_TIMESTAMP"``
        (None with a sequence number, and for an end that hands down ``TRIM_HORIZON``)."""
        return self.fields.reset_to

    @property
    def timestamp(self) -> datetime | None:
        """The time of a start pinned to ``AT_TIMESTAMP`` (an end's included); None otherwise."""
        return self.fields.timestamp

    @property
    def key(self) -> SequenceKey | None:
        """The last consumed user record: ``(sequence, sub-sequence)`` inside a KPL aggregate, ``(sequence, WHOLE)``
        when the whole Kinesis record was consumed (so a checkpoint that finishes an aggregate is ahead of one
        inside it); None when nothing was consumed."""
        return self.position.key

    def is_behind(self, other: "Checkpoint") -> bool:
        """True when this checkpoint would move ``other`` backwards."""
        if other.shard_end and not self.shard_end:
            return True
        mine, theirs = self.key, other.key
        return theirs is not None and (mine is None or mine < theirs)

    def stamped(self, owner: str) -> "Checkpoint":
        return replace(self, owner=owner, updated_at=datetime.now(timezone.utc))

    def to_json(self) -> bytes:
        """The stored form (version 1): the position's fields, the owner and the time of the write."""
        fields = self.fields
        doc = {
            "version": FORMAT_VERSION,
            "sequence_number": fields.sequence_number,
            "sub_sequence_number": fields.sub_sequence_number,
            "shard_end": fields.shard_end,
            "owner": self.owner,
            "updated_at": (self.updated_at or datetime.now(timezone.utc)).isoformat(),
        }
        if fields.reset_to is not None:
            doc["reset_to"] = fields.reset_to
        if fields.timestamp is not None:
            doc["timestamp"] = fields.timestamp.isoformat()
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, shard_id: str, raw: bytes, where: str) -> "Checkpoint":
        """Parse the stored form; any problem is a ``CheckpointError`` naming ``where`` (never a silent default)
        and the commands that show and replace it."""
        try:
            return cls._parse(shard_id, raw, where)
        except CheckpointError as exc:
            raise CheckpointError(f"{exc}; {repair_hint(shard_id, where)}") from exc

    @classmethod
    def _parse(cls, shard_id: str, raw: bytes, where: str) -> "Checkpoint":
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CheckpointError(f"checkpoint at {where} is not valid UTF-8 JSON ({exc})") from exc
        if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
            version = doc.get("version") if isinstance(doc, dict) else None
            raise CheckpointError(f"checkpoint at {where} has version {version!r}; this kinesis_spout reads "
                                  f"version {FORMAT_VERSION}")
        seq = doc.get("sequence_number")
        sub = doc.get("sub_sequence_number")
        shard_end = doc.get("shard_end", False)
        reset_to = doc.get("reset_to")
        raw_ts = doc.get("timestamp")
        timestamp: datetime | None = None
        if raw_ts is not None:
            try:
                timestamp = datetime.fromisoformat(raw_ts) if isinstance(raw_ts, str) else None
            except ValueError:
                timestamp = None
            if timestamp is None:
                raise CheckpointError(f"checkpoint at {where} has an unreadable timestamp {raw_ts!r} (expected "
                                      f"ISO-8601); fix or reset it")
            if timestamp.tzinfo is None:
                timestamp = timestamp.replace(tzinfo=timezone.utc)
        if not isinstance(shard_end, bool):
            raise CheckpointError(f"checkpoint at {where} has a non-boolean shard_end {shard_end!r}")
        # the position fields: a sequence number, a reset_to, a timestamp and a sub-sequence number that store one
        position = from_checkpoint_fields(CheckpointFields(seq, sub, shard_end, reset_to, timestamp), where)
        updated = doc.get("updated_at")
        try:
            updated_at = datetime.fromisoformat(updated) if isinstance(updated, str) else None
        except ValueError:
            updated_at = None
        return cls(shard_id, owner=str(doc.get("owner", "")), updated_at=updated_at, position=position)


def repair_hint(shard_id: str, where: str) -> str:
    """How to see and replace an unreadable checkpoint: the ``kinesis-spout`` commands, complete when ``where`` is
    ``"ZooKeeper HOSTS {prefix}/{app}/{stream}/checkpoints/{shard}"`` (the ZooKeeper store's). Who calls:
    :meth:`Checkpoint.from_json`, for its errors."""
    import shlex

    _, hosts, node = (where.split(" ", 2) + ["", ""])[:3] if where.startswith("ZooKeeper ") else ("", "", "")
    parts = node.rsplit("/", 4)
    if len(parts) != 5 or parts[3] != "checkpoints":
        return (f"`kinesis-spout checkpoints` (with the app's --stream, --app, --zookeeper and --prefix) shows it, "
                f"and `kinesis-spout checkpoints reset --shard {shard_id} --to trim-horizon --yes` with the same "
                f"flags replaces it")
    prefix, app, stream = parts[0] or "/", parts[1], parts[2]
    flags = " ".join(shlex.quote(v) for v in ("--zookeeper", hosts, "--prefix", prefix, "--app", app, "--stream",
                                               stream))
    return (f"`kinesis-spout checkpoints {flags}` shows it; stop the app, then "
            f"`kinesis-spout checkpoints reset {flags} --shard {shlex.quote(shard_id)} --to trim-horizon --yes` "
            f"replaces it (--to latest skips the shard's records instead, --to SEQUENCE_NUMBER resumes after one; "
            f"add --tls* flags and $KINESIS_SPOUT_ZOOKEEPER_AUTH if the app uses them)")


@runtime_checkable
class CheckpointStore(Protocol):
    """Where one app's checkpoints of one stream live.

    Who calls: the spout (``open``, ``load``, ``close``), its checkpoint writer thread (``save``), the shard sync
    and the CLI (``list``, ``delete``). ``save`` never moves a stored checkpoint backwards: a lower value raises
    ``CheckpointConflict`` and is not written.

    Fencing is not part of it: only a store in ZooKeeper is fenced, by the lease manager, which works on the
    store's :class:`ZooKeeperHome` (``fence``/``unfence``); the spout only sees a fenced write's refusal
    (``LeaseLost``, raised by ``save``). A pipeline's batch ids and ownership are Spark's
    (:mod:`kinesis_spout.spark.bookkeeping.batch_store`, :mod:`kinesis_spout.spark.bookkeeping.ownership`).

    One capability is declared, not required: a store whose checkpoints live in ZooKeeper says so with a
    ``zookeeper_home`` attribute (a :class:`ZooKeeperHome`; the ZooKeeper store's is the store itself), read by
    :func:`zookeeper_home`. With it the store gets what meets in ZooKeeper: leases (``coordination="auto"`` or
    ``"leases"``), Spark's batch ends and ownership on its session, and the Spark driver's checkpoint copies of many
    shards in one transaction. A store that declares nothing (the memory store, a user's store implementing only
    the methods below) keeps working: static coordination (``"leases"`` is refused), batch ids and ownership in
    memory or its own (:func:`kinesis_spout.spark.bookkeeping.batch_store.batch_store_for`,
    :func:`kinesis_spout.spark.bookkeeping.ownership.ownership_for`), checkpoints saved one by one.
    """

    def open(self) -> None: ...

    def load(self, shard_id: str) -> Checkpoint | None: ...

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        """Store ``checkpoint``; ``force`` overwrites even a higher one (only for an operator's reset)."""
        ...

    def list(self) -> dict[str, Checkpoint]: ...

    def delete(self, shard_id: str) -> None: ...

    def close(self) -> None: ...


class ZooKeeperHome(Protocol):
    """Where a checkpoint store's checkpoints live in ZooKeeper, declared by the store as ``zookeeper_home``.

    Who reads it (through :func:`zookeeper_home`): the spout's coordination choice and lease membership, the lease
    manager (:class:`kinesis_spout.coordination.leases.ZooKeeperLeases`: leases on ``session`` under
    ``base_path``, and ``fence``/``unfence`` of the store's writes, so a lease and the checkpoint it guards meet in
    one transaction), Spark's batch store and ownership (on ``session`` under ``base_path``) and the Spark driver's
    checkpoint writer (many nodes under ``path`` in one transaction on ``session``). A custom store declares one to
    get leases: its ``save`` must then write ``{path}/{shard_id}`` on ``session`` and honour the fences.
    """

    @property
    def session(self) -> "ZooKeeperSession":
        """The store's open session, shared with the leases, batch ends and ownership."""
        ...

    @property
    def path(self) -> str:
        """``{prefix}/{app}/{stream}/checkpoints``: the node whose children hold the shards' checkpoints as
        :meth:`Checkpoint.to_json`."""
        ...

    @property
    def base_path(self) -> str:
        """``{prefix}/{app}/{stream}``: where the leases, workers, batch ends and ownership nodes go."""
        ...

    def fence(self, shard_id: str, lease_node: str, epoch: int) -> None: ...

    def unfence(self, shard_id: str, *, revoke: bool = False) -> None: ...

    def add_listener(self, listener: "Listener") -> None: ...


def zookeeper_home(store: object) -> ZooKeeperHome | None:
    """The :class:`ZooKeeperHome` ``store`` declares (its ``zookeeper_home`` attribute), None when it declares
    none (the memory store, a user's store). Who calls: every part that needs ZooKeeper beside the checkpoints
    (coordination, leases, Spark's batch store, ownership and driver checkpoint writes); nothing changes."""
    return getattr(store, "zookeeper_home", None)
