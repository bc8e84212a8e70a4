"""Samples of the checkpoints stored in ZooKeeper, checked for per-shard monotonicity.

The spout, the lease workers, the pipeline and the readStream source store one znode per shard under
``{prefix}/{app}/{stream}/checkpoints``, a JSON document whose ``sequence_number`` is the checkpoint. A path calls
:meth:`CheckpointSampler.sample` between faults and once at the end; a sequence number lower than one sampled
before for the same shard is a checkpoint moved backwards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CheckpointSampler:
    """Samples of the checkpoints under ``base`` (``{prefix}/{app}/{stream}/checkpoints``).

    Who calls: the path's thread only. ``highest`` is each shard's highest sequence number sampled so far,
    ``backwards`` each regression found (``shard: before -> after``), ``samples`` how many samples were read and
    ``failed`` how many could not be read (ZooKeeper down at that moment).
    """

    zk: Any
    base: str
    highest: dict[str, int] = field(default_factory=dict)
    backwards: list[str] = field(default_factory=list)
    samples: int = 0
    failed: int = 0

    def read(self) -> dict[str, int]:
        """The stored checkpoints (shard -> sequence number); raises when ZooKeeper does not answer."""
        if not self.zk.exists(self.base):
            return {}
        out: dict[str, int] = {}
        for shard in self.zk.get_children(self.base):
            doc = json.loads(self.zk.get(f"{self.base}/{shard}")[0] or b"{}")
            seq = str(doc.get("sequence_number") or "")
            if seq.isdigit():
                out[shard] = int(seq)
        return out

    def sample(self) -> None:
        """Read the checkpoints once and note any that moved backwards. A ZooKeeper error counts as ``failed``."""
        try:
            now = self.read()
        except Exception:  # noqa: BLE001 - ZooKeeper may be restarting right now: a missed sample, not a failure
            self.failed += 1
            return
        self.samples += 1
        for shard, seq in now.items():
            before = self.highest.get(shard)
            if before is not None and seq < before:
                self.backwards.append(f"{shard}: {before} -> {seq}")
            self.highest[shard] = max(seq, before or 0)
        for shard in set(self.highest) - set(now):
            self.backwards.append(f"{shard}: {self.highest.pop(shard)} -> (deleted)")
