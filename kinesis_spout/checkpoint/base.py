"""The checkpoint value, its JSON form, and the CheckpointStore protocol."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kinesis_spout.errors import CheckpointError
from kinesis_spout.positions import (
    AT_TIMESTAMP_NAME,
    RESET_POSITIONS,
    CheckpointFields,
    Position,
    from_checkpoint_fields,
    to_checkpoint_fields,
)
from kinesis_spout.records import WHOLE, SequenceKey

if TYPE_CHECKING:
    from kinesis_spout.zookeeper.session import Listener, ZooKeeperSession

__all__ = ["FORMAT_VERSION", "RESET_POSITIONS", "Checkpoint", "CheckpointStore", "ZooKeeperHome", "zookeeper_home"]

FORMAT_VERSION = 1
# RESET_POSITIONS (from kinesis_spout.positions): the starts a checkpoint can hold instead of a sequence number,
# where a shard in which nothing was consumed yet starts. ``TRIM_HORIZON`` and ``LATEST`` come from an operator's
# reset (``kinesis-spout checkpoints reset``); ``AT_TIMESTAMP`` (with ``timestamp``) is a start pinned by the spout
# or the Spark source before the first record of the shard is delivered, so a crash before the first checkpoint
# resumes at the same place.


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A shard's safe checkpoint: every record at or below ``key`` is done.

    ``sequence_number`` is None only for a finished shard in which nothing was read (``shard_end`` True), or for
    a shard in which nothing was consumed yet: ``reset_to`` then says where it starts (``"TRIM_HORIZON"``,
    ``"LATEST"``, or ``"AT_TIMESTAMP"`` at ``timestamp``). Such a start is behind every checkpoint with a sequence
    number. :attr:`position` is the :class:`kinesis_spout.positions.Position` the fields store, :meth:`at` the
    checkpoint that stores a position.
    """

    shard_id: str
    sequence_number: str | None
    sub_sequence_number: int | None = None
    shard_end: bool = False
    owner: str = ""
    updated_at: datetime | None = None
    reset_to: str | None = None
    timestamp: datetime | None = None

    @classmethod
    def pinned(cls, shard_id: str, timestamp: datetime) -> "Checkpoint":
        """The start of a shard in which nothing was consumed yet, pinned to records that arrived at ``timestamp``
        or later (how ``LATEST`` and ``AT_TIMESTAMP`` are made durable)."""
        when = timestamp if timestamp.tzinfo else timestamp.replace(tzinfo=timezone.utc)
        return cls(shard_id, None, reset_to=AT_TIMESTAMP_NAME, timestamp=when)

    @classmethod
    def at(cls, shard_id: str, position: Position, owner: str = "", updated_at: datetime | None = None
           ) -> "Checkpoint":
        """The checkpoint of ``shard_id`` that stores ``position`` (its fields by
        :func:`kinesis_spout.positions.to_checkpoint_fields`)."""
        seq, sub, shard_end, reset_to, timestamp = to_checkpoint_fields(position)
        return cls(shard_id, seq, sub, shard_end, owner, updated_at, reset_to, timestamp)

    @property
    def position(self) -> Position:
        """The position the checkpoint stores; ``CheckpointError`` for fields that store none (never for a
        checkpoint read by :meth:`from_json`, which refuses those)."""
        return from_checkpoint_fields(CheckpointFields(self.sequence_number, self.sub_sequence_number,
                                                       self.shard_end, self.reset_to, self.timestamp),
                                      f"shard {self.shard_id}")

    @property
    def key(self) -> SequenceKey | None:
        """The last consumed user record: ``(sequence, sub-sequence)`` inside a KPL aggregate, ``(sequence, WHOLE)``
        when the whole Kinesis record was consumed (so a checkpoint that finishes an aggregate is ahead of one
        inside it); None when nothing was consumed."""
        if self.sequence_number is None:
            return None
        sub = WHOLE if self.sub_sequence_number is None else self.sub_sequence_number
        return SequenceKey(int(self.sequence_number), sub)

    def is_behind(self, other: "Checkpoint") -> bool:
        """True when this checkpoint would move ``other`` backwards."""
        if other.shard_end and not self.shard_end:
            return True
        mine, theirs = self.key, other.key
        return theirs is not None and (mine is None or mine < theirs)

    def stamped(self, owner: str) -> "Checkpoint":
        return replace(self, owner=owner, updated_at=datetime.now(timezone.utc))

    def to_json(self) -> bytes:
        doc = {
            "version": FORMAT_VERSION,
            "sequence_number": self.sequence_number,
            "sub_sequence_number": self.sub_sequence_number,
            "shard_end": self.shard_end,
            "owner": self.owner,
            "updated_at": (self.updated_at or datetime.now(timezone.utc)).isoformat(),
        }
        if self.reset_to is not None:
            doc["reset_to"] = self.reset_to
        if self.timestamp is not None:
            doc["timestamp"] = self.timestamp.isoformat()
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
        from_checkpoint_fields(CheckpointFields(seq, sub, shard_end, reset_to, timestamp), where)
        updated = doc.get("updated_at")
        try:
            updated_at = datetime.fromisoformat(updated) if isinstance(updated, str) else None
        except ValueError:
            updated_at = None
        return cls(shard_id, seq, sub, shard_end, str(doc.get("owner", "")), updated_at, reset_to, timestamp)


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
    (:mod:`kinesis_spout.spark.batch_store`, :mod:`kinesis_spout.spark.ownership`).

    One capability is declared, not required: a store whose checkpoints live in ZooKeeper says so with a
    ``zookeeper_home`` attribute (a :class:`ZooKeeperHome`; the ZooKeeper store's is the store itself), read by
    :func:`zookeeper_home`. With it the store gets what meets in ZooKeeper: leases (``coordination="auto"`` or
    ``"leases"``), Spark's batch ends and ownership on its session, and the Spark driver's checkpoint copies of many
    shards in one transaction. A store that declares nothing (the memory store, a user's store implementing only
    the methods below) keeps working: static coordination (``"leases"`` is refused), batch ids and ownership in
    memory or its own (:func:`kinesis_spout.spark.batch_store.batch_store_for`,
    :func:`kinesis_spout.spark.ownership.ownership_for`), checkpoints saved one by one.
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
