"""``scale-curve.png``: each key figure of the curve against shards, measured points and the fitted model
(matplotlib, Agg backend, imported only here).

Who calls: :func:`benchmarks.scale.curve.run_curve`, after the runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.scale.model import FIGURES, Fit, model_at, size_of


def plot(points: list[dict[str, Any]], fits: dict[str, Fit], out: Path) -> None:
    """Writes ``out``: one panel per figure, shards on a log axis, the model drawn along the curve's sizes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [f for f in FIGURES if f[0] not in ("zk_znodes", "register_s", "take_s")]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    low, top = min(p["shards"] for p in points), max(p["shards"] for p in points)
    line = sorted({2 ** k for k in range(0, 20) if low <= 2 ** k <= top} | {p["shards"] for p in points})
    for ax, (key, label, unit) in zip(axes.flat, panels):
        measured = [p for p in points if p["figures"].get(key) is not None]
        ax.plot([p["shards"] for p in measured], [p["figures"][key] for p in measured], "o", color="#4c72b0",
                label="measured")
        for p in measured:
            reused = " (reused, load {:.0f})".format(p["load_before"][0]) if p["source"].startswith("reused") and \
                p.get("load_before") else ""
            ax.annotate(f"{p['workers']}w{reused}", (p["shards"], p["figures"][key]), textcoords="offset points",
                        xytext=(4, 4), fontsize=7, ha="right" if reused else "left")
        gets = fits.get("get_records_per_s_per_shard")
        ys = [model_at(fits, key, *size_of(s), gets.at(*size_of(s)) if gets else None) for s in line]
        if all(y is not None for y in ys):
            formula = fits[key].formula if key in fits else "start-up + taking leases"
            ax.plot(line, ys, "--", color="#c44e52", label=f"model: {formula}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("shards (workers: one per 64, at least 2)")
        ax.set_ylabel(unit or label)
        ax.set_title(label, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.suptitle("Lease workers at scale: the curve (make scale, --curve)")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
