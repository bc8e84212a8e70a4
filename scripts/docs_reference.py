"""Renders the generated parts of the reference pages from the code, so the pages cannot drift from it:

- docs/reference/configuration.md: every ``SpoutConfig`` setting (its flat keyword, its group field, its string
  option and its default, all read from :mod:`kinesis_spout.config`), the Spark source's own options, the options
  a stream read ignores, and the AWS Scala connector's option names (read from :mod:`kinesis_spout.spark`);
- docs/reference/cli.md: the help of ``kinesis-spout`` and of each of its commands, from the argparse parser;
- kinesis_spout/config/flat.py: the flat spelling of ``SpoutConfig`` (the ``FlatSettings`` keywords and the
  ``FlatView`` properties), from the table of settings :data:`kinesis_spout.config.names.SETTINGS` and the types of
  the groups' fields.

What a setting *means* is written here, once, in ``MEANINGS`` (and ``SOURCE_OPTIONS``): a setting of the code
without a meaning here, or a meaning of a setting the code no longer has, is an error naming it.

Usage: python scripts/docs_reference.py [--check | --write]
  --check (default) exits 1 and names the page when a page differs from what the code renders (`make docs` runs it);
  --write renders the pages again in place. tests/unit/tooling/test_docs_reference.py checks the same.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any folder: this checkout's kinesis_spout
    sys.path.insert(0, str(ROOT))
if str(ROOT / "scripts") not in sys.path:  # loaded by path (the tests): its sibling modules
    sys.path.insert(0, str(ROOT / "scripts"))
from page_blocks import DriftError, render_blocks  # noqa: E402

CONFIG_PAGE = ROOT / "docs" / "reference" / "configuration.md"
CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"
FLAT_MODULE = ROOT / "kinesis_spout" / "config" / "flat.py"

#: What each setting means, by flat ``SpoutConfig`` keyword. ``None:`` in front of a text says what None (the
#: default) stands for.
MEANINGS: dict[str, str] = {
    "stream_name": "the Kinesis stream, or several: a comma-separated list as an option (`clicks,orders`), a list "
                   "in Python (see [several streams](../guides/spout.md#several-streams))",
    "app_name": "the application (Storm's topology name); scopes checkpoints",
    "stream_positions": "per-stream initial positions (`TRIM_HORIZON` or `LATEST`), given as `initial_position` "
                        "mapping stream to position (as an option, a JSON object: `{\"orders\": \"TRIM_HORIZON\"}`); "
                        "streams left out start at `LATEST`",
    "zookeeper": "ZooKeeper connect string for checkpoints",
    "zookeeper_prefix": "root path of this library's znodes",
    "zookeeper_session_timeout_s": "ZooKeeper session timeout (1 to 3600; the server bounds it by its min/max)",
    "zookeeper_deadline_s": "if checkpoints cannot be written for this long, `next_tuple()` raises "
                            "`CheckpointError`",
    "zookeeper_auth": "`user:password` for ZooKeeper digest auth; never shown in reprs, logs or errors",
    "zookeeper_world_readable": "with auth: others may read (not change) the checkpoints",
    "zookeeper_tls": "connect to ZooKeeper over TLS",
    "zookeeper_tls_ca_file": "None: the system CAs. PEM file of the CA that signed ZooKeeper's certificate",
    "zookeeper_tls_cert_file": "PEM client certificate, when the server asks for one",
    "zookeeper_tls_key_file": "PEM key of the client certificate",
    "region": "None: the AWS default chain, else `us-east-1`. the AWS region",
    "endpoint_url": "None: AWS. the Kinesis endpoint (emulators, LocalStack, VPC endpoints)",
    "credentials": "None: the AWS default chain. this spout's or source's own AWS identity, an `AwsCredentials`: "
                   "see [AWS credentials](../guides/credentials.md)",
    "initial_position": "`TRIM_HORIZON`, `LATEST` or `AT_TIMESTAMP`, for shards without a checkpoint whose parents "
                        "hand down no start (see [the lineage rule](../concepts.md#the-lineage-rule)); with several "
                        "streams, also a mapping of stream to position (see `stream_positions`)",
    "initial_timestamp": "start time for `AT_TIMESTAMP` (ISO-8601 as an option)",
    "max_records_per_call": "GetRecords limit (1 to 10,000)",
    "empty_record_backoff_s": "wait after an empty GetRecords (at least 0.2)",
    "max_empty_record_backoff_s": "the wait doubles with each empty GetRecords of a shard, up to this (reset by "
                                  "data): fewer calls on idle shards, at the cost of up to this much latency when "
                                  "one wakes up; `None` (`off` as an option) keeps the wait at "
                                  "`empty_record_backoff_s` (see [idle shards](../guides/spout.md#idle-shards))",
    "shard_sync_interval_s": "how often a running spout lists the shards to find those of a reshard (also at once "
                             "when a shard ends)",
    "checkpoint_interval_s": "at most one checkpoint write per shard per interval (0 = every advance)",
    "retry_limit": "retries of a failed record before it is dead-lettered (0 = none)",
    "retry_backoff": "backoff before a failed record is emitted again (initial seconds, multiplier, maximum "
                     "seconds)",
    "message_timeout_s": "a record neither acked nor failed within this is failed (Storm's message timeout); "
                         "`None` disables",
    "max_inflight_records": "per shard: emitted and not yet done (Storm's max spout pending)",
    "max_inflight_bytes": "per shard: bytes emitted and not yet done",
    "prefetch_records": "per shard: read-ahead buffer, records",
    "prefetch_bytes": "per shard: read-ahead buffer, bytes",
    "reader_threads": "threads making the GetRecords calls of all the spout's shards (a shared pool; a full "
                      "buffer parks its shard without holding a thread); `0`: a thread per shard",
    "reliable": "`False` acks every record on emit (Storm with ackers = 0)",
    "deaggregate": "take KPL aggregates apart into their user records (`False`: deliver them whole)",
    "drop_foreign_user_records": "drop the user records of a KPL aggregate whose hash keys belong to other "
                                 "shards, as KCL does (`False`: deliver them all, for producers that aggregate "
                                 "across shards)",
    "scheme": "`raw`, `text` or `json` as an option, or your own callable",
    "dead_letter": "where dead letters go: by default whole in `./kinesis-spout-dead-letters/<app>/<stream>.jsonl` "
                   "(`$KINESIS_SPOUT_DEAD_LETTER_DIR` for another folder); a handler `(record, reason)` or a "
                   "destination (`KinesisDeadLetters`, `JsonLinesDeadLetters`), see "
                   "[Dead letters](../guides/dead-letters.md)",
    "dead_letter_deadline_s": "after this long of failing dead-letter writes, `next_batch`/`next_tuple` raise "
                              "`DeadLetterError` (the writes go on being retried; nothing is dropped)",
    "max_dead_letters_in_a_row": "this many dead letters with no record decoded between them stop the spout "
                                 "(`DeadLetterStormError`); 0 or `off`: no limit",
    "max_dead_letter_ratio": "more than this share of the last `dead_letter_window` records read dead-lettered "
                             "stops the spout; 0 or `off`: no limit",
    "dead_letter_window": "the records read that the ratio looks at",
    "min_dead_letters_in_window": "the ratio rule trips only with at least this many dead letters in the window",
    "metrics_port": "serve Prometheus metrics on this port from `open()` to `close()` (0: any free port; needs "
                    "`kinesis-spout[metrics]`), see [Metrics](../guides/metrics.md)",
    "task_index": "Storm-style task parallelism (static split): this task's number",
    "task_count": "Storm-style task parallelism (static split): the number of tasks",
    "coordination": "`auto`: `leases` with the ZooKeeper checkpoint store (and `task_count` 1), else `static`; "
                    "`static` (by `task_index`/`task_count`) or `leases` (workers share the shards through "
                    "ZooKeeper leases)",
    "worker_id": "recorded as the owner of checkpoints and leases; unique per live worker",
    "lease_settle_s": "leases: a worker that just joined takes at most 16 leases until the live workers have not "
                      "changed for this long (at most 10 s after it joined), so workers started together take their "
                      "own shares instead of moving them after; 0 takes its share at once",
    "retrieval": "`polling`: GetRecords, shared by every app reading the stream (5 calls, 2 MiB/s per shard); "
                 "`fanout`: enhanced fan-out, records pushed to this app's own stream consumer over "
                 "SubscribeToShard (2 MiB/s per shard of its own, billed per consumer-shard hour and GB; on Spark "
                 "in both read modes): see [Enhanced fan-out](../guides/fanout.md)",
    "consumer_name": "None: the app name. the stream consumer fan-out registers (or finds) and reads through",
    "subscription_renewal_s": "fan-out: a shard's subscription is renewed after this long, from the last record "
                              "delivered (Kinesis ends one after 5 minutes; keep it at 5 s or more)",
}

#: Defaults computed when a config is made, shown as what they stand for.
COMPUTED_DEFAULTS: dict[str, str] = {"worker_id": "`host:pid`"}

#: The options of the Spark source that are not SpoutConfig settings, by name: what each means.
SOURCE_OPTIONS: dict[str, str] = {
    "maxRecordsPerTrigger": "stream reads: at most this many records per micro-batch (Spark's `ReadMaxRows`)",
    "maxBytesPerTrigger": "stream reads: at most this many bytes (data + partition key) per micro-batch "
                          "(`ReadMaxBytes`)",
    "readMode": "stream reads: `auto` (default): `executors` on a cluster, `driver` on `local[...]` (needs "
                "`kinesis_spout.spark.register(spark)`; registered by hand the master is not known and `auto` is "
                "`driver`); `driver`: the driver reads Kinesis and hands the records to the tasks; `executors`: "
                "the driver only plans and tasks of up to `shardsPerTask` shards read on the executors",
    "recordsPerPartition": "stream reads with `readMode=driver`: the records of a batch are packed into partitions "
                           "of up to this many, several shards' to a partition (default 10,000; a shard's records "
                           "are never split, so a shard with more is a partition alone). Lower it to spread heavy "
                           "per-record work over more tasks",
    "shardsPerTask": "stream reads with `readMode=executors`: a batch reads its shards with new records in tasks of "
                     "up to this many shards (default 32), read at once by threads of the task; each task records "
                     "its shards' ends in one ZooKeeper node, so a batch costs ZooKeeper about two requests per task. "
                     "Lower it for more tasks (more cores) on a backlog of few shards; 1 is a task per shard",
    "startingTimestamp": "batch reads (`spark.read`): the earliest arrival time read (default: each shard's oldest "
                         "record)",
    "endingTimestamp": "batch reads (`spark.read`): the latest arrival time read (default: when the read is "
                       "planned)",
}

BEGIN = "<!-- BEGIN GENERATED: {name} (scripts/docs_reference.py --write renders it from the code) -->"
END = "<!-- END GENERATED: {name} -->"
#: The markers in a Python module.
PY_BEGIN = "# BEGIN GENERATED: {name} (scripts/docs_reference.py --write renders it from the code)"
PY_END = "# END GENERATED: {name}"


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool) or isinstance(value, (int, float)) and not isinstance(value, bool) and value < 1024:
        return f"`{value!r}`"
    if isinstance(value, int):
        for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
            if value >= 1 << shift and value % (1 << shift) == 0:
                return f"`{value >> shift} {unit}`"
        return f"`{value:,}`"
    if isinstance(value, float):
        return f"`{value!r}`"
    if hasattr(value, "value") and type(value).__module__.startswith("kinesis_spout"):  # an enum
        return f"`{value.value}`"
    return f"`{value}`" if isinstance(value, str) else f"`{value!r}`"


def settings_rows() -> list[tuple[str, str, str, str, str, str]]:
    """(group class, flat keyword, group field, options, default, meaning) of every setting, in the code's order.
    Raises DriftError naming the settings of the code without a meaning and the meanings without a setting."""
    from kinesis_spout.config import SpoutConfig
    from kinesis_spout.config.names import FLAT_FIELDS, GROUP_CLASSES
    from kinesis_spout.config.options import OPTION_NAMES

    sample = SpoutConfig(stream_name="s", app_name="a")
    own = [f.name for f in dataclasses.fields(SpoutConfig) if f.name not in GROUP_CLASSES]
    names = [*own, *FLAT_FIELDS]
    missing = [n for n in names if n not in MEANINGS]
    unknown = [n for n in MEANINGS if n not in names]
    if missing or unknown:
        raise DriftError(f"scripts/docs_reference.py MEANINGS must hold exactly the settings of SpoutConfig: add "
                         f"{missing} (what each means), remove {unknown}")
    by_option: dict[str, list[str]] = {}
    for option, flat in OPTION_NAMES.items():
        by_option.setdefault(flat.split(".")[0], []).append(f"`{option}`")
    order = ["", *GROUP_CLASSES]  # SpoutConfig's own fields, then the groups in the code's order
    names.sort(key=lambda n: order.index(FLAT_FIELDS.get(n, ("", n))[0]))
    rows = []
    for name in names:
        group, field = FLAT_FIELDS.get(name, ("", name))
        holder = getattr(sample, group) if group else sample
        spec = {f.name: f for f in dataclasses.fields(holder)}[field]
        if name in COMPUTED_DEFAULTS:
            default = COMPUTED_DEFAULTS[name]
        elif spec.default is not dataclasses.MISSING:
            default = _show(spec.default)
        elif spec.default_factory is not dataclasses.MISSING:
            default = _show(spec.default_factory())
        else:
            default = "required"
        meaning = MEANINGS[name]
        if meaning.startswith("None: "):
            none_text, _, meaning = meaning[len("None: "):].partition(". ")
            default = none_text if default == "none" else default
        options = ", ".join(by_option.get(name, [])) or "(Python only)"
        rows.append((GROUP_CLASSES.get(group, "SpoutConfig"), name, f"{group}.{field}" if group else field,
                     options, default, meaning))
    return rows


def render_settings() -> str:
    lines = []
    current = None
    for group, name, field, options, default, meaning in settings_rows():
        if group != current:
            current = group
            lines += ["", f"### `{group}`", "", "| setting | group field | option | default | meaning |",
                      "|---|---|---|---|---|"]
        lines.append(f"| `{name}` | `{field}` | {options} | {default} | {meaning} |")
    return "\n".join(lines[1:])


def render_source_options() -> str:
    from kinesis_spout.spark.source.offsets import SOURCE_ONLY_OPTIONS, UNUSED_BY_SOURCE
    from kinesis_spout.spark.source.read_kinds import BATCH_OPTIONS

    names = [*SOURCE_ONLY_OPTIONS, *BATCH_OPTIONS]
    missing = [n for n in names if n not in SOURCE_OPTIONS]
    unknown = [n for n in SOURCE_OPTIONS if n not in names]
    if missing or unknown:
        raise DriftError(f"scripts/docs_reference.py SOURCE_OPTIONS must hold exactly the Spark source's own "
                         f"options: add {missing} (what each means), remove {unknown}")
    lines = ["| option | meaning |", "|---|---|"]
    lines += [f"| `{name}` | {SOURCE_OPTIONS[name]} |" for name in names]
    lines += ["", "Accepted by a stream read and reported at `load()` as having no effect there (they act on the "
                  "per-record ack and fail of the spout): " + ", ".join(f"`{o}`" for o in sorted(UNUSED_BY_SOURCE))
              + "."]
    return "\n".join(lines)


def render_aliases() -> str:
    from kinesis_spout.spark.source.aliases import ALIASES, REFUSED

    lines = ["| AWS connector option (any case) | read as |", "|---|---|"]
    lines += [f"| `{alias}` | `{option}` |" for alias, option in ALIASES.items()]
    lines += ["", "| refused at `load()` | why, and what to use instead |", "|---|---|"]
    lines += [f"| `{alias}` | {why} |" for alias, why in REFUSED.items()]
    return "\n".join(lines)


def _flat_settings() -> list[tuple[str, str, str, str, str]]:
    """(flat keyword, group attribute, field, group class, type) of every setting of the table, in its order."""
    from kinesis_spout.config import SpoutConfig
    from kinesis_spout.config.names import SETTINGS

    group_types = {f.name: f.type for f in dataclasses.fields(SpoutConfig)}
    sample = SpoutConfig(stream_name="s", app_name="a")
    rows = []
    for setting in SETTINGS:
        types = {f.name: f.type for f in dataclasses.fields(getattr(sample, setting.group))}
        if setting.field not in types:
            raise DriftError(f"kinesis_spout/config/names.py SETTINGS: {setting.flat} names "
                             f"{group_types[setting.group]}.{setting.field}, which is no field of it")
        rows.append((setting.flat, setting.group, setting.field, str(group_types[setting.group]),
                     str(types[setting.field])))
    return rows


#: Keywords that take more than their field holds: ``SpoutConfig`` turns a mapping of stream to position into one
#: position per stream (``stream_positions``) and the field's default.
KEYWORD_TYPES = {"initial_position": "InitialPosition | Mapping[str, InitialPosition]"}


def render_flat_settings() -> str:
    lines = ["class FlatSettings(TypedDict, total=False):",
             '    """The flat keywords of ``SpoutConfig(...)``, each optional (a keyword left out keeps its group\'s '
             'value)."""', ""]
    lines += [f"    {flat}: {KEYWORD_TYPES.get(flat, kind)}" for flat, _, _, _, kind in _flat_settings()]
    return "\n".join(lines)


def render_flat_view() -> str:
    lines = ["class FlatView:",
             '    """The flat attributes of ``SpoutConfig``, read from its groups. Read-only (the config is frozen).',
             "",
             "    Each is read from its group on first use and then kept in the instance (``cached_property``): the "
             "config and",
             "    its groups are frozen, so the copy never goes stale, and a flat read in a per-record path costs "
             "what a plain",
             '    attribute does."""',
             ""]
    from kinesis_spout.config.names import GROUP_CLASSES

    lines += [f"    {group}: {kind}" for group, kind in GROUP_CLASSES.items()]
    for flat, group, field, group_class, kind in _flat_settings():
        lines += ["", "    @cached_property", f"    def {flat}(self) -> {kind}:",
                  f'        """``{group}.{field}`` ({group_class})."""', f"        return self.{group}.{field}"]
    return "\n".join(lines)


#: Where the command line's parser factory may live: the module ``kinesis_spout.cli`` or a module of the
#: ``kinesis_spout.cli`` package, under one of these names. Looked up by name, so this script does not depend on
#: how the command line is laid out.
PARSER_MODULES = ("kinesis_spout.cli", "kinesis_spout.cli.parser", "kinesis_spout.cli.main", "kinesis_spout.cli.app")
PARSER_FACTORIES = ("build_parser", "make_parser", "parser", "_parser")


def cli_parser() -> argparse.ArgumentParser:
    """The ``kinesis-spout`` parser, from the first factory found in ``PARSER_MODULES`` x ``PARSER_FACTORIES``."""
    for module_name in PARSER_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in PARSER_FACTORIES:
            factory: Callable[[], Any] | None = getattr(module, name, None)
            if callable(factory):
                parser = factory()
                if isinstance(parser, argparse.ArgumentParser):
                    return parser
    raise DriftError(f"no parser factory of the command line: looked for {PARSER_FACTORIES} in {PARSER_MODULES}; "
                     f"name the factory in scripts/docs_reference.py PARSER_FACTORIES")


def _commands(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:  # argparse lists sub-commands only in its actions
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, f"{path} {name}")
    return found


def render_cli() -> str:
    os.environ["COLUMNS"] = "110"  # argparse wraps help text to the terminal: the same width everywhere
    parser = cli_parser()
    parser.prog = "kinesis-spout"
    lines: list[str] = []
    for path, sub in _commands(parser, "kinesis-spout"):
        text = sub.format_help().rstrip()
        text = re.sub(r"^usage: .*?kinesis-spout", "usage: kinesis-spout", text)
        lines += [f"### `{path}`", "", "```text", text, "```", ""]
    return "\n".join(lines).rstrip()


GENERATED: dict[Path, dict[str, Callable[[], str]]] = {
    CONFIG_PAGE: {"settings": render_settings, "source-options": render_source_options,
                  "connector-options": render_aliases},
    CLI_PAGE: {"commands": render_cli},
    FLAT_MODULE: {"typed-dict": render_flat_settings, "flat-view": render_flat_view},
}


def rendered(page: Path, text: str | None = None) -> str:
    """``page``'s text (or ``text``) with each generated block rendered again from the code. Raises DriftError
    when a block's markers are missing, or when the code and the meanings written here disagree."""
    text = page.read_text() if text is None else text
    begin, end = (PY_BEGIN, PY_END) if page.suffix == ".py" else (BEGIN, END)
    return render_blocks(page, text, GENERATED[page], begin, end)


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--write", action="store_true", help="render the generated blocks again in place")
    args.add_argument("--check", action="store_true", help="exit 1 when a page differs from the code (default)")
    opts = args.parse_args(argv)
    stale = []
    try:
        for page in GENERATED:
            fresh = rendered(page)
            if fresh != page.read_text():
                if opts.write:
                    page.write_text(fresh)
                    print(f"rendered {page.relative_to(ROOT)}")
                else:
                    stale.append(str(page.relative_to(ROOT)))
    except DriftError as exc:
        print(f"docs_reference: {exc}", file=sys.stderr)
        return 1
    if stale:
        print(f"docs_reference: {', '.join(stale)} no longer match the code: run "
              f"`python scripts/docs_reference.py --write` and commit the pages", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
