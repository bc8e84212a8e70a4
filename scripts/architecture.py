"""Renders the generated parts of docs/architecture.md from the import contracts and the code, so the map of the house
cannot drift from it:

- the layers, highest first, and the parts of kinesis_spout in each (the ``layers`` contract of
  ``[tool.importlinter]`` in pyproject.toml, and its name for the layers);
- the contracts ``make lint`` checks, and the imports each one ignores (none, when the house is in order);
- which third-party libraries each part imports (read from every import of its modules: at the top, inside a function
  or under ``if TYPE_CHECKING:``);
- the layout: each package and top-level module, its layer, what it holds and its modules.

What a part *holds* is written here, once, in ``HOLDS``; the rest is read from pyproject.toml and the files. A package
or top-level module of the code without an entry in ``HOLDS``, an entry for a part the code no longer has, or a part
in no layer is an error naming it.

Usage: python scripts/architecture.py [--check | --write]
  --check (default) exits 1 when the page differs from what the code renders (`make docs` runs it);
  --write renders the page again in place. tests/unit/tooling/test_architecture_page.py checks the same.
"""

from __future__ import annotations

import argparse
import ast
import functools
import sys
from pathlib import Path
from typing import Callable

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter's own TOML reader
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "scripts") not in sys.path:  # loaded by path (the tests): its sibling modules
    sys.path.insert(0, str(ROOT / "scripts"))
from page_blocks import DriftError, render_blocks  # noqa: E402

PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = "kinesis_spout"

#: What each part of kinesis_spout holds, by its path under kinesis_spout/ (a package ends with "/").
HOLDS: dict[str, str] = {
    "cli/": "the `kinesis-spout` command, one module per command group",
    "demo.py": "the word-count demo (`make demo`, `kinesis-spout demo`)",
    "testing/": "the pytest plugin and its fixtures, the local servers it starts (ZooKeeper, moto, the emulators, "
                "Redis, Memcached, Spark), the fault proxies (Kinesis, ZooKeeper), crash helpers, a lease worker "
                "process",
    "spark/": "Spark adapters (this package holds only the lazy public names; each module is in the package "
              "that owns it)",
    "spark/shared/": "what the adapters share: the columns of a batch of records and their Arrow form, a Spark "
                     "Python process's Kinesis and ZooKeeper clients",
    "spark/bookkeeping/": "what Spark's side keeps next to the checkpoints, in ZooKeeper or in memory: batch ids, the "
                          "ends executor reads record, the exactly-once pipeline's ownership (no pyspark: the CLI "
                          "reads it)",
    "spark/pipeline/": "`SpoutPipeline`: the at-least-once and exactly-once runners, the exactly-once batch log, "
                       "their shared run loop and batch retries, the `Batch` handed to `process` and the run's "
                       "metrics",
    "spark/source/": "the DataSource (readStream and `spark.read`): driver and executor planners and readers, the "
                     "shared shard reads, the driver's checkpoint writes, the Arrow codec; its pure logic (options "
                     "and their aliases, offsets, executor batches, the reported lag) and the lag listener",
    "spark/sink/": "the Kinesis sink (`df.write` / `writeStream` with `format(\"kinesis\")`): options, columns, the "
                   "tasks' writers",
    "spout/": "`KinesisSpout` (facade.py) over one lifecycle per shard (shards.py), the owned shards and the lock "
              "(registry.py), starting, emission, acks, dead letters, KPL checkpoints and lease membership",
    "kinesis/": "Kinesis I/O (botocore) shared by reading and writing: the client and credentials, botocore errors "
                "as the library's, shard listing, the lean calls, the KPL format (aggregation.py, pure)",
    "kinesis/retrieval/": "reading: the getter protocol and the one factory that makes a getter, polling "
                          "(GetRecords) or fan-out (SubscribeToShard, consumers), the buffered and round-robin "
                          "readers and their thread pool, the one rule for retriable read errors (read_retries), "
                          "replies decoded into columns",
    "kinesis/writing/": "writing: the putter (PutRecords with retries), routing by shard, the KPL aggregator and "
                        "aggregate writer, the service's limits",
    "zookeeper/": "one bounded kazoo session shared by the stores built on it, its security (ACL, TLS, secrets "
                  "masked in logs), and the library's ZooKeeper errors, translated from kazoo's at the session",
    "checkpoint/": "the checkpoint store protocol, the ZooKeeper store (compare-and-set, lease fencing) on a session, "
                   "the in-memory store, the coalescing writer and its throttle (pure, shared with the Spark source)",
    "coordination/": "who reads which shard and from where: lineage and assignment (pure), starts and pins, the "
                     "shard sync and its listing schedule (pure, shared with the Spark source), ZooKeeper leases and "
                     "rebalancing",
    "state/": "Trident state: map states, values, serializer, aggregators (pure), the Spark operations, the "
              "transaction log, Redis and Memcached backing maps",
    "deadletters/": "dead-letter destinations (handler, Kinesis stream, JSON Lines), their envelope, the writer "
                    "thread and replay",
    "metrics/": "per-shard metrics, the Prometheus collector, its metric names, the HTTP endpoint",
    "positions.py": "pure: the one position in a shard, its order, its stored forms and its GetShardIterator "
                    "arguments",
    "records.py": "value types: a record, its sequence key",
    "tracker.py": "the names of the per-shard in-flight tracker and the types its callers use (no logic of its own)",
    "tracking/": "pure: the tracker, `SpanTracker`: spans of records, failures, retries, timeouts, the safe "
                 "checkpoint",
    "errors.py": "the library's error tree (`SpoutError`)",
    "config/": "`SpoutConfig`, its groups of settings, option names and parsing, credentials",
    "retry.py": "pure: the retry policy (delays, cap, jitter, attempts, deadline), `call()` and a `Backoff` for loops",
    "schemes.py": "record schemes (bytes to values)",
    "lazy_names.py": "pure: a package's public names loaded on first use (the packages' `__getattr__` and `__dir__`)",
}

BEGIN = "<!-- BEGIN GENERATED: {name} (scripts/architecture.py --write renders it from pyproject.toml and the code) -->"
END = "<!-- END GENERATED: {name} -->"


def contracts() -> list[dict[str, object]]:
    """The import-linter contracts of pyproject.toml."""
    with (ROOT / "pyproject.toml").open("rb") as toml:
        found: list[dict[str, object]] = tomllib.load(toml)["tool"]["importlinter"]["contracts"]
    return found


def layers() -> list[tuple[str, list[str]]]:
    """``(label, parts)`` of each layer, highest first: the parts as the layers contract lists them, the labels from
    its name (``Layers: front > adapters > ...``)."""
    (contract,) = [c for c in contracts() if c["type"] == "layers"]
    listed = [[p.strip() for p in str(layer).replace("|", ":").split(":")] for layer in contract["layers"]]
    labels = [label.strip() for label in str(contract["name"]).split(":", 1)[1].split(">")]
    if len(labels) != len(listed):
        raise DriftError(f"the layers contract's name gives {len(labels)} labels for {len(listed)} layers: "
                         f"{contract['name']!r}")
    return list(zip(labels, listed))


def parts(root: Path = ROOT) -> dict[str, Path]:
    """Each part of kinesis_spout: its packages at any depth (``"kinesis/retrieval/"``) and its top-level modules
    (``"retry.py"``), by path under kinesis_spout/."""
    base = root / PACKAGE
    found = {f"{p.parent.relative_to(base).as_posix()}/": p.parent for p in base.rglob("__init__.py")
             if p.parent != base}
    found.update({p.name: p for p in base.glob("*.py") if p.name != "__init__.py"})
    return dict(sorted(found.items()))


def _top(part: str) -> str:
    """The name the layers contract knows a part by: ``"kinesis/retrieval/"`` -> ``"kinesis"``."""
    return part.split("/")[0].removesuffix(".py")


def _modules(path: Path) -> list[Path]:
    return sorted(path.glob("*.py")) if path.is_dir() else [path]


@functools.cache
def third_party(path: Path) -> frozenset[str]:
    """The top-level names of what the modules of ``path`` (a package's own files, or a module) import that is neither
    the standard library nor kinesis_spout."""
    names: set[str] = set()
    for module in _modules(path):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return frozenset(n for n in names if n != PACKAGE and n not in sys.stdlib_module_names and n != "__future__")


def _checked() -> dict[str, Path]:
    """The parts, after checking that each has a description and a layer, and that each description has a part."""
    found = parts()
    missing = sorted(set(found) - set(HOLDS))
    gone = sorted(set(HOLDS) - set(found))
    placed = {p for _, members in layers() for p in members}
    unplaced = sorted(p for p in found if _top(p) not in placed)
    if missing or gone or unplaced:
        raise DriftError("; ".join(filter(None, [
            f"describe {missing} in HOLDS of scripts/architecture.py" if missing else "",
            f"remove {gone} from HOLDS of scripts/architecture.py (the code has no such part)" if gone else "",
            f"place {unplaced} in a layer of [tool.importlinter] in pyproject.toml" if unplaced else ""])))
    return found


def _code(name: str) -> str:
    return f"`{name}`"


def render_layers() -> str:
    rows = ["| layer | parts |", "|---|---|"]
    for label, members in layers():
        rows.append(f"| {label} | {', '.join(_code(m) for m in members)} |")
    return "\n".join(rows)


def render_contracts() -> str:
    rows = ["| contract | kind | imports it ignores |", "|---|---|---|"]
    for contract in contracts():
        ignored = contract.get("ignore_imports") or []
        shown = ", ".join(_code(str(i)) for i in ignored) if ignored else "none"
        rows.append(f"| {contract['name']} | {contract['type']} | {shown} |")
    return "\n".join(rows)


def render_third_party() -> str:
    found = _checked()
    users: dict[str, list[str]] = {}
    for part, path in found.items():
        for name in third_party(path):
            users.setdefault(name, []).append(part)
    rows = ["| library | imported by |", "|---|---|"]
    for name in sorted(users):
        rows.append(f"| {name} | {', '.join(_code(p) for p in users[name])} |")
    return "\n".join(rows)


def render_layout() -> str:
    found = _checked()
    rows = ["| part | layer | what it holds | modules |", "|---|---|---|---|"]
    for label, members in reversed(layers()):
        for part in [p for p in found if _top(p) in members]:
            path = found[part]
            modules = ", ".join(m.stem for m in _modules(path) if m.name != "__init__.py") if path.is_dir() else ""
            rows.append(f"| `{part}` | {label} | {HOLDS[part]} | {modules} |")
    return "\n".join(rows)


GENERATED: dict[str, Callable[[], str]] = {
    "layers": render_layers,
    "contracts": render_contracts,
    "third-party": render_third_party,
    "layout": render_layout,
}


def rendered(text: str | None = None) -> str:
    """The page's text (or ``text``) with each generated block rendered again. Raises DriftError when a block's
    markers are missing, or when the code, the contracts and ``HOLDS`` disagree."""
    text = PAGE.read_text(encoding="utf-8") if text is None else text
    return render_blocks(PAGE, text, GENERATED, BEGIN, END)


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    args.add_argument("--write", action="store_true", help="render the generated blocks again in place")
    args.add_argument("--check", action="store_true", help="exit 1 when the page differs from the code (default)")
    opts = args.parse_args(argv)
    try:
        fresh = rendered()
    except DriftError as exc:
        print(f"architecture: {exc}", file=sys.stderr)
        return 1
    if fresh == PAGE.read_text(encoding="utf-8"):
        return 0
    if opts.write:
        PAGE.write_text(fresh, encoding="utf-8")
        print(f"rendered {PAGE.relative_to(ROOT)}")
        return 0
    print(f"architecture: {PAGE.relative_to(ROOT)} no longer matches the code: run "
          f"`python scripts/architecture.py --write` and commit the page", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
