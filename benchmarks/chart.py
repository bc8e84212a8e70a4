"""``latest.png``: the benchmark figures in a few panels (matplotlib, Agg backend, imported only here).

Bars and points are medians; error bars span the lowest to the highest run.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any, Callable


def _med(fig: Any) -> float:
    return float(fig["median"]) if isinstance(fig, dict) else float(fig)


def _err(figs: list[Any]) -> list[list[float]]:
    """Asymmetric error bars (median - min, max - median) for matplotlib."""
    lows = [_med(f) - float(f["min"]) if isinstance(f, dict) else 0.0 for f in figs]
    highs = [float(f["max"]) - _med(f) if isinstance(f, dict) else 0.0 for f in figs]
    return [lows, highs]


def _tracker_speed(ax: Any, rows: list[dict[str, Any]]) -> None:
    rows = [r for r in rows if r["kind"] == "throughput"]
    labels = [r["case"].replace(" acks", "").replace(", keys counted", "\n+keys") for r in rows]
    figs = [r["pairs_per_s"] for r in rows]
    ax.bar(range(len(rows)), [_med(f) / 1e6 for f in figs], yerr=[[v / 1e6 for v in e] for e in _err(figs)],
           color=["#4c72b0" if not r["key_creation_counted"] else "#8172b3" for r in rows], capsize=3)
    ax.axhline(2.0, color="#c44e52", linestyle="--", linewidth=1, label="goal 2 M/s")
    ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("M emit+ack pairs/s")
    ax.set_title("Tracker throughput (1% failures)")
    ax.legend(fontsize=7)


def _memory(ax: Any, tracker_rows: list[dict[str, Any]], scaling_rows: list[dict[str, Any]]) -> None:
    scale = [r for r in scaling_rows if r["kind"] == "memory"]
    if scale:
        ax.plot([r["inflight_records"] for r in scale], [_med(r["bytes_per_inflight_record"]) for r in scale],
                marker="o", label="1 shard, all in flight")
        ax.set_xscale("log")
    for state, marker in (("all in flight", "s"), ("after random acks", "^")):
        pts = [r for r in tracker_rows if r["kind"] == "memory" and r["state"] == state]
        if pts:
            ax.scatter([r["inflight_records"] * (1 + 0.15 * i) for i, r in enumerate(pts)],
                       [_med(r["bytes_per_inflight_record"]) for r in pts], marker=marker,
                       label=f"{'/'.join(str(r['shards']) for r in pts)} shards, {state}")
    ax.axhline(150, color="#c44e52", linestyle="--", linewidth=1, label="goal 150 B")
    ax.set_xlabel("records in flight")
    ax.set_ylabel("bytes per in-flight record")
    ax.set_title("Tracker memory (keys, payload not counted)")
    ax.legend(fontsize=7)


def _consumers(ax: Any, read_rows: list[dict[str, Any]], peer_rows: list[dict[str, Any]]) -> None:
    rows = [r for r in read_rows if r["emulator"] == "kinesalite"] + [
        dict(r, case=f"{r['case']} (worker)") for r in peer_rows if r.get("status") == "ok"]
    if not rows:
        ax.set_visible(False)
        return
    x = range(len(rows))
    ax.bar(x, [_med(r["records_per_s"]) for r in rows], yerr=_err([r["records_per_s"] for r in rows]),
           color="#55a868", capsize=3)
    ax.set_xticks(x, [r["case"].replace(", botocore defaults", "\n(botocore defaults)") for r in rows],
                  rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("records/s (bars)")
    twin = ax.twinx()
    twin.plot(list(x), [_med(r["cpu_us_per_record"]) for r in rows], "o", color="#dd8452")
    twin.set_ylabel("CPU µs per record (dots)")
    twin.set_ylim(bottom=0)
    ax.set_title(f"Reading {rows[0]['records']:,} records, {rows[0]['shards']} shards, kinesalite")


def _by_consumer(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["consumer"], []).append(row)
    return out


def _checkpoint_writes(ax: Any, rows: list[dict[str, Any]]) -> None:
    groups = _by_consumer(rows)
    width = 0.8 / max(1, len(groups))
    for i, (consumer, pts) in enumerate(groups.items()):
        xs = [j + (i - (len(groups) - 1) / 2) * width for j in range(len(pts))]
        ax.bar(xs, [_med(r["zk_writes_per_s"]) for r in pts], width, label=consumer,
               yerr=_err([r["zk_writes_per_s"] for r in pts]), capsize=3)
    first = next(iter(groups.values()))
    ax.set_yscale("symlog")
    ax.set_xticks(range(len(first)), [f"{r['checkpoint_interval_s']:g} s" for r in first])
    ax.set_xlabel("checkpoint_interval_s")
    ax.set_ylabel("ZooKeeper writes/s while reading")
    ax.set_title("Checkpoint writes by interval")
    ax.legend(fontsize=7)


def _checkpoint_cost(ax: Any, rows: list[dict[str, Any]]) -> None:
    groups = _by_consumer(rows)
    for consumer, pts in groups.items():
        ax.errorbar(range(len(pts)), [_med(r["cpu_us_per_record"]) for r in pts],
                    yerr=_err([r["cpu_us_per_record"] for r in pts]), marker="o", capsize=3,
                    label=f"{consumer}: CPU µs/record")
    first = next(iter(groups.values()))
    ax.set_xticks(range(len(first)), [f"{r['checkpoint_interval_s']:g} s" for r in first])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("checkpoint_interval_s")
    ax.set_ylabel("CPU µs per record")
    flat = groups.get("flat out")
    if flat:
        twin = ax.twinx()
        twin.plot(range(len(flat)), [_med(r["records_per_s"]) for r in flat], "s--", color="#55a868",
                  label="flat out: records/s")
        twin.set_ylabel("flat-out records/s (dashed)")
        twin.set_ylim(bottom=0)
    ax.set_title("Checkpoint cost: CPU and throughput")
    ax.legend(fontsize=7, loc="lower left")


def _shards(ax: Any, rows: list[dict[str, Any]]) -> None:
    for consumer, color in (("boto3 loop", "#4c72b0"), ("KinesisSpout", "#55a868")):
        pts = [r for r in rows if r.get("consumer") == consumer]
        if pts:
            ax.errorbar([r["shards"] for r in pts], [_med(r["records_per_s"]) for r in pts],
                        yerr=_err([r["records_per_s"] for r in pts]), marker="o", capsize=3, color=color,
                        label=consumer)
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 4, 16], ["1", "4", "16"])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("shards")
    ax.set_ylabel("records/s")
    ax.set_title("Read throughput by shard count (kinesalite)")
    ax.legend(fontsize=7)


def write_chart(results: dict[str, Any], modules: dict[str, ModuleType | None], path: Path) -> None:
    """Draw the panels of the benchmarks that ran (and any module's own ``plot``) into one PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def rows(name: str) -> list[dict[str, Any]]:
        entry = results["benchmarks"].get(name) or {}
        return list(entry.get("rows") or [])

    panels: list[Callable[[Any], None]] = []
    if rows("tracker"):
        panels.append(lambda ax: _tracker_speed(ax, rows("tracker")))
    if rows("tracker") or rows("scaling"):
        panels.append(lambda ax: _memory(ax, rows("tracker"), rows("scaling")))
    if rows("read") or rows("peers"):
        panels.append(lambda ax: _consumers(ax, rows("read"), rows("peers")))
    if rows("checkpoint"):
        panels.append(lambda ax: _checkpoint_writes(ax, rows("checkpoint")))
        panels.append(lambda ax: _checkpoint_cost(ax, rows("checkpoint")))
    if any(r["kind"] == "throughput" for r in rows("scaling")):
        panels.append(lambda ax: _shards(ax, [r for r in rows("scaling") if r["kind"] == "throughput"]))
    for name, module in modules.items():
        plot = getattr(module, "plot", None)
        if plot is not None and rows(name):
            panels.append(lambda ax, plot=plot, name=name: plot(ax, rows(name)))
    if not panels:
        return
    cols = min(3, len(panels))
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 4.6 * nrows), squeeze=False)
    for ax, draw in zip(axes.flat, panels):
        draw(ax)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    machine = results["machine"]
    fig.suptitle(f"kinesis_spout benchmarks ({results['mode']}), {results['finished_at'][:10]}, "
                 f"{machine['cores']} cores, {machine['python']}; medians, bars = min-max of runs", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    tmp.replace(path)
