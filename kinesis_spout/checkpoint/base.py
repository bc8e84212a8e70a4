"""The checkpoint value, its JSON form, and the CheckpointStore protocol."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Protocol, runtime_checkable

from kinesis_spout.errors import CheckpointError
from kinesis_spout.records import SequenceKey

FORMAT_VERSION = 1
#: Positions a checkpoint can be reset to (``kinesis-spout checkpoints reset --to ...``) instead of a sequence number.
RESET_POSITIONS = ("TRIM_HORIZON", "LATEST")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A shard's safe checkpoint: every record at or below ``key`` is done.

    ``sequence_number`` is None only for a finished shard in which nothing was read (``shard_end`` True), or for
    a checkpoint reset to a position: ``reset_to`` is then ``"TRIM_HORIZON"`` or ``"LATEST"`` and the shard
    restarts there. A reset checkpoint is behind every checkpoint with a sequence number.
    """

    shard_id: str
    sequence_number: str | None
    sub_sequence_number: int | None = None
    shard_end: bool = False
    owner: str = ""
    updated_at: datetime | None = None
    reset_to: str | None = None

    @property
    def key(self) -> SequenceKey | None:
        if self.sequence_number is None:
            return None
        return SequenceKey(int(self.sequence_number), self.sub_sequence_number or 0)

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
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, shard_id: str, raw: bytes, where: str) -> "Checkpoint":
        """Parse the stored form; any problem is a ``CheckpointError`` naming ``where`` (never a silent default)."""
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CheckpointError(f"checkpoint at {where} is not valid UTF-8 JSON ({exc}); inspect it with "
                                  f"`kinesis-spout checkpoints`, fix or reset it") from exc
        if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
            version = doc.get("version") if isinstance(doc, dict) else None
            raise CheckpointError(f"checkpoint at {where} has version {version!r}; this kinesis_spout reads "
                                  f"version {FORMAT_VERSION}")
        seq = doc.get("sequence_number")
        sub = doc.get("sub_sequence_number")
        shard_end = doc.get("shard_end", False)
        if seq is not None and (not isinstance(seq, str) or not seq.isdigit()):
            raise CheckpointError(f"checkpoint at {where} has a non-numeric sequence_number {seq!r}")
        reset_to = doc.get("reset_to")
        if reset_to is not None and (reset_to not in RESET_POSITIONS or seq is not None):
            raise CheckpointError(f"checkpoint at {where} has a bad reset_to {reset_to!r}: expected one of "
                                  f"{', '.join(RESET_POSITIONS)} and no sequence_number")
        if seq is None and not shard_end and reset_to is None:
            raise CheckpointError(f"checkpoint at {where} has no sequence_number")
        if sub is not None and (isinstance(sub, bool) or not isinstance(sub, int) or sub < 0):
            raise CheckpointError(f"checkpoint at {where} has a bad sub_sequence_number {sub!r}")
        if not isinstance(shard_end, bool):
            raise CheckpointError(f"checkpoint at {where} has a non-boolean shard_end {shard_end!r}")
        updated = doc.get("updated_at")
        try:
            updated_at = datetime.fromisoformat(updated) if isinstance(updated, str) else None
        except ValueError:
            updated_at = None
        return cls(shard_id, seq, sub, shard_end, str(doc.get("owner", "")), updated_at, reset_to)


@runtime_checkable
class CheckpointStore(Protocol):
    """Where one app's checkpoints of one stream live.

    Who calls: the spout (``open``, ``load``), its checkpoint writer thread (``save``), the CLI (``list``,
    ``delete``). ``save`` never moves a stored checkpoint backwards: a lower value raises ``CheckpointConflict``
    and is not written.
    """

    def open(self) -> None: ...

    def load(self, shard_id: str) -> Checkpoint | None: ...

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        """Store ``checkpoint``; ``force`` overwrites even a higher one (only for an operator's reset)."""
        ...

    def list(self) -> dict[str, Checkpoint]: ...

    def delete(self, shard_id: str) -> None: ...

    def load_batch_id(self) -> int:
        """The last batch id (txid) a pipeline stored with these checkpoints; 0 when none was stored."""
        ...

    def save_batch_id(self, batch_id: int) -> None:
        """Store a pipeline's batch id; like checkpoints it never moves back (``CheckpointConflict``)."""
        ...

    def close(self) -> None: ...
