"""The results of a soak: one :class:`PathResult` per path, written to ``soak.md`` and ``soak.json``."""

from __future__ import annotations

import json
import platform
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.soak.checkpoints import CheckpointSampler
from benchmarks.soak.cycle import FaultStats


@dataclass
class PathResult:
    """What one path found. ``ok`` is False when anything was lost, a count is inexact or a checkpoint went
    backwards, or when records were still behind at the end (``caught_up`` False); ``built`` is False for a path
    not built yet (it then passes nothing and fails nothing).

    A record not delivered by the end is **lost** only when a stored checkpoint passed it (the sequence number the
    shard's checkpoint reached, the highest sampled, is at or beyond the record's): no consumer will read it again.
    One still ahead of its shard's checkpoint is **behind**: the consumers had not caught up when the drain ended,
    which is lag, not loss. An exactly-once count below the produced one while records are behind is lag too; a
    count above it, or below it with nothing behind, is inexact.
    """

    path: str
    built: bool = True
    produced: int = 0
    delivered: int = 0
    lost: int = 0
    lost_ids: list[str] = field(default_factory=list)
    behind: int = 0  # not delivered, but ahead of the shard's checkpoint at the end: lag, not loss
    behind_ids: list[str] = field(default_factory=list)
    duplicates: int = 0
    exact: bool | None = None  # None: not an exactly-once path
    inexact_keys: dict[str, list[int]] = field(default_factory=dict)  # key -> [expected, stored]
    checkpoints_backwards: list[str] = field(default_factory=list)
    checkpoint_samples: int = 0
    checkpoint_samples_missed: int = 0
    longest_stall_s: float = 0.0
    faults: dict[str, int] = field(default_factory=dict)
    mean_cycle_s: dict[str, float] = field(default_factory=dict)
    #: kind -> faults, mean_cycle_s, longest_stall_s, duplicates, fenced: what the windows of its faults saw
    by_kind: dict[str, dict[str, float]] = field(default_factory=dict)
    drain_s: float = 0.0
    wall_s: float = 0.0
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the harness's own failure (a server that would not start), with its traceback

    @property
    def safe(self) -> bool:
        """Nothing lost, no count inexact, no checkpoint backwards (what a fault may never break)."""
        return self.error is None and self.lost == 0 and self.exact is not False and not self.checkpoints_backwards

    @property
    def caught_up(self) -> bool:
        """Every produced record delivered by the end of the drain."""
        return self.behind == 0

    @property
    def ok(self) -> bool:
        return not self.built or (self.safe and self.caught_up)

    def count_deliveries(self, produced: dict[str, int], delivered: Counter[str],
                         checkpoints: dict[str, int] | None = None) -> None:
        """Fill produced, delivered, lost and behind (each with its first ids as ``#number shard:sequence``) and
        duplicates. ``checkpoints`` (shard -> the highest sequence number its stored checkpoint reached) tells a
        lost record (at or before its shard's checkpoint) from one behind (after it, or no checkpoint); without
        them every missing record counts as lost."""
        self.produced = len(produced)
        self.delivered = len(delivered.keys() & produced.keys())
        missing = sorted(produced.keys() - delivered.keys(), key=lambda m: produced[m])
        lost = missing if checkpoints is None else [m for m in missing if passed(m, checkpoints)]
        behind = [] if checkpoints is None else [m for m in missing if not passed(m, checkpoints)]
        self.lost, self.behind = len(lost), len(behind)
        self.lost_ids = [f"#{produced[m]} {m}" for m in lost[:10]]
        self.behind_ids = [f"#{produced[m]} {m}" for m in behind[:10]]
        self.duplicates = sum(n - 1 for n in delivered.values())

    def judge_counts(self, expected: Counter[str], stored: Counter[str]) -> None:
        """Fill ``exact`` and ``inexact_keys`` of an exactly-once path. Counts short of the produced ones while
        records are behind are lag (``exact`` stays None: not judged); a count above the produced one is inexact
        whatever else happened."""
        self.inexact_keys = {k: [expected[k], stored[k]] for k in sorted(expected.keys() | stored.keys())
                             if expected[k] != stored[k]}
        over = any(stored[k] > expected[k] for k in stored)
        self.exact = None if self.inexact_keys and self.behind and not over else not self.inexact_keys

    def take_faults(self, stats: FaultStats, sampler: CheckpointSampler) -> None:
        """Fill the fault counts, cycle times, events and checkpoint checks."""
        stats.close_window()
        self.faults = dict(stats.done)
        self.mean_cycle_s = stats.mean_cycle_s()
        self.by_kind = stats.by_kind()
        checkout = str(Path(__file__).resolve().parents[2]) + "/"  # paths in tracebacks, relative to the checkout
        self.findings += [event.replace(checkout, "") for event in stats.events]
        self.checkpoints_backwards = list(sampler.backwards)
        self.checkpoint_samples = sampler.samples
        self.checkpoint_samples_missed = sampler.failed


def passed(message_id: str, checkpoints: dict[str, int]) -> bool:
    """Whether the checkpoint of the record's shard is at or beyond the record (``shard:sequence``)."""
    shard, _, sequence = message_id.rpartition(":")
    reached = checkpoints.get(shard)
    return reached is not None and sequence.isdigit() and int(sequence) <= reached


def verdict(result: PathResult) -> str:
    if not result.built:
        return "not built yet"
    if result.error is not None:
        return "COULD NOT RUN"
    if not result.safe:
        return "FAILED"
    return "ok" if result.caught_up else "BEHIND (nothing lost)"


def by_kind_table(result: PathResult) -> list[str]:
    """Per fault kind, what the windows of its faults saw (a window: from the fault's start to the next one's).
    Lost records are counted per path: a record lost at the end cannot be pinned on one fault."""
    if not result.by_kind:
        return []
    lines = ["", "  | fault kind | faults | mean cycle | longest stall | duplicates | fenced writes |",
             "  |---|---|---|---|---|---|"]
    for kind, row in result.by_kind.items():
        lines.append(f"  | {kind} | {row['faults']:.0f} | {row['mean_cycle_s']:.1f} s | "
                     f"{row['longest_stall_s']:.1f} s | {row['duplicates']:.0f} | {row['fenced']:.0f} |")
    return lines + [""]


def markdown(results: list[PathResult], seed: int, argv: list[str], wall_s: float) -> str:
    """The report as Markdown: a summary table, then each path's details."""
    lines = ["# Chaos soak", "",
             f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.node()} "
             f"({platform.machine()}), seed **{seed}**, `python -m benchmarks.soak {' '.join(argv)}`, "
             f"{wall_s / 60:.1f} min in all. Replay with `--seed {seed}`.", "",
             "| path | verdict | produced | delivered | lost | behind | duplicates | exact | checkpoints backwards "
             "| longest stall | catch-up | faults | wall |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if not r.built or r.error is not None:
            lines.append(f"| {r.path} | {verdict(r)} | | | | | | | | | | | |")
            continue
        exact = ("n/a" if r.inexact_keys == {} else "behind") if r.exact is None else ("yes" if r.exact else "**NO**")
        faults = ", ".join(f"{k} {n}" for k, n in sorted(r.faults.items()))
        lines.append(f"| {r.path} | {verdict(r)} | {r.produced} | {r.delivered} | {r.lost} | {r.behind} | "
                     f"{r.duplicates} | {exact} | {len(r.checkpoints_backwards)} ({r.checkpoint_samples} samples) | "
                     f"{r.longest_stall_s:.1f} s | {r.drain_s:.0f} s | {faults} | {r.wall_s:.0f} s |")
    for r in results:
        lines += ["", f"## {r.path}", ""]
        if not r.built:
            lines += [f"- {note}" for note in r.notes] or ["- not built yet"]
            continue
        if r.error is not None:
            lines += ["- the path could not run:", "  ```", *("  " + line for line in r.error.splitlines()), "  ```"]
            continue
        lines.append(f"- mean seconds per fault cycle by kind: {r.mean_cycle_s}; drain {r.drain_s:.1f} s")
        lines += by_kind_table(r)
        if r.lost_ids:
            lines.append(f"- first lost ids (a stored checkpoint passed them): {', '.join(r.lost_ids)}")
        if r.behind_ids:
            lines.append(f"- first ids behind (ahead of their shard's checkpoint at the end: not caught up, not "
                         f"lost): {', '.join(r.behind_ids)}")
        if r.inexact_keys:
            lines.append(f"- inexact counts (key: [expected, stored]): {r.inexact_keys}")
        if r.checkpoints_backwards:
            lines.append(f"- checkpoints moved backwards: {r.checkpoints_backwards[:10]}")
        lines += [f"- {note}" for note in r.notes]
        if r.findings:
            lines.append(f"- events ({len(r.findings)}):")
            lines += ["  ```", *("  " + line for f in r.findings[:20] for line in f.splitlines()), "  ```"]
    return "\n".join(lines) + "\n"


def write(results: list[PathResult], out: Path, seed: int, argv: list[str], wall_s: float) -> None:
    """Write ``out`` (Markdown) and the same results as JSON beside it (``.json``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown(results, seed, argv, wall_s))
    doc: dict[str, Any] = {"seed": seed, "argv": argv, "wall_s": round(wall_s, 1),
                           "ok": all(r.ok for r in results),
                           "paths": [{**asdict(r), "ok": r.ok} for r in results]}
    out.with_suffix(".json").write_text(json.dumps(doc, indent=2) + "\n")
