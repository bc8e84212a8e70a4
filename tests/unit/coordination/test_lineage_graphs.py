"""Where each shard starts, over a table of shard graphs: the spout's way (shards handed over as their parents end,
each decided from what is stored then) and the Structured Streaming source's way (every listed shard decided at
once in the query's first offset) must deliver the same records, and the records KCL's shard-sync rules deliver.

Pure: each shard of a graph has records with arrival times; a start position selects the records a reader from
there delivers. The app starts at ``NOW``: records before it are "old", records after it "new" (only open shards
get new ones). LATEST delivers exactly the new records; TRIM_HORIZON every record; AT_TIMESTAMP T the records
that arrived at T or later; a stored checkpoint resumes after it, and its descendants follow it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Mapping

import pytest

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.config import InitialPosition, SpoutConfig
from kinesis_spout.coordination import lineage
from kinesis_spout.coordination.lineage import ShardStart
from kinesis_spout.positions import AT_TIMESTAMP_NAME, LATEST, TRIM_HORIZON, Kind, Position, at_timestamp
from kinesis_spout.records import SequenceKey
from kinesis_spout.spark.source.offsets import initial_positions

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
NOW = T0 + timedelta(hours=1)  # when the app (spout or query) first starts


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@dataclass(frozen=True)
class Graph:
    """A stream's shards: ``parents`` of each listed shard, which are ``closed``, each shard's records as
    ``label -> (sequence number, arrival)`` (sequence numbers grow with arrival within a shard), and the app's
    ``stored`` checkpoints (of listed shards, or of parents no longer listed)."""

    parents: Mapping[str, tuple[str, ...]]
    closed: frozenset[str]
    records: Mapping[str, Mapping[str, tuple[int, datetime]]]
    stored: Mapping[str, Checkpoint] = field(default_factory=dict)

    def labels(self) -> set[str]:
        return {label for recs in self.records.values() for label in recs}

    def arrived_from(self, when: datetime) -> set[str]:
        return {label for recs in self.records.values() for label, (_, ts) in recs.items() if ts >= when}


def shard_records(shard: str, *arrivals: datetime) -> dict[str, tuple[int, datetime]]:
    """Records ``<shard>1``, ``<shard>2``... arriving at ``arrivals`` (in order)."""
    return {f"{shard}{i}": (100 * i, ts) for i, ts in enumerate(arrivals, 1)}


NEW = NOW + timedelta(minutes=5)

# A -> B, C (split at minute 3); A's records before it, the children's after, and new ones in the open children.
SPLIT = Graph({"A": (), "B": ("A",), "C": ("A",)}, frozenset({"A"}),
              {"A": shard_records("A", at(1), at(2)), "B": shard_records("B", at(4), NEW),
               "C": shard_records("C", at(5), NEW)})
# A, B -> C (merge at minute 3)
MERGE = Graph({"A": (), "B": (), "C": ("A", "B")}, frozenset({"A", "B"}),
              {"A": shard_records("A", at(1)), "B": shard_records("B", at(2)), "C": shard_records("C", at(4), NEW)})
# A -> B, C (minute 3); C, D -> E (minute 6)
SPLIT_THEN_MERGE = Graph(
    {"A": (), "D": (), "B": ("A",), "C": ("A",), "E": ("C", "D")}, frozenset({"A", "C", "D"}),
    {"A": shard_records("A", at(1)), "D": shard_records("D", at(2), at(5)), "B": shard_records("B", at(4), NEW),
     "C": shard_records("C", at(4.5)), "E": shard_records("E", at(7), NEW)})
# three generations: A -> B, C (minute 3); B -> D, F (minute 6); D -> G, H (minute 9)
CHAIN = Graph(
    {"A": (), "B": ("A",), "C": ("A",), "D": ("B",), "F": ("B",), "G": ("D",), "H": ("D",)},
    frozenset({"A", "B", "D"}),
    {"A": shard_records("A", at(1)), "B": shard_records("B", at(4)), "C": shard_records("C", at(4.5), NEW),
     "D": shard_records("D", at(7)), "F": shard_records("F", at(7.5), NEW), "G": shard_records("G", at(10), NEW),
     "H": shard_records("H", at(11), NEW)})


def without(graph: Graph, gone: str, **stored: Checkpoint) -> Graph:
    """``graph`` with ``gone`` aged out of the listing (its records with it) and ``stored`` checkpoints."""
    parents = {s: p for s, p in graph.parents.items() if s != gone}
    return Graph(parents, graph.closed - {gone}, {s: r for s, r in graph.records.items() if s != gone}, stored)


def with_stored(graph: Graph, **stored: Checkpoint) -> Graph:
    return Graph(graph.parents, graph.closed, graph.records, stored)


# -- the two ways of starting ------------------------------------------------------------------------------------
def selected(records: Mapping[str, tuple[int, datetime]], position: Position) -> set[str]:
    """The records a reader delivers from a start position."""
    if position == TRIM_HORIZON:
        return set(records)
    if position.kind is Kind.AFTER:
        assert position.key is not None
        return {label for label, (s, _) in records.items() if s > position.key.sequence}
    when = position.timestamp
    assert position.kind is Kind.AT_TIMESTAMP and when is not None, position
    return {label for label, (_, ts) in records.items() if ts >= when}


def end_checkpoint(shard: str, start: ShardStart, last: SequenceKey | None) -> Checkpoint:
    return lineage.end_checkpoint(shard, start, last)


def spout_delivers(graph: Graph, position: InitialPosition, timestamp: datetime | None) -> dict[str, set[str]]:
    """The spout's way: the first listing records the app's first start (at LATEST: a pin on every open shard, a
    never-read mark on every closed one); then each round, the shards whose parents have ended are handed over and
    decided from what is stored then; a closed shard is read to its end and its end stored."""
    stored = dict(graph.stored)
    stored.update(lineage.first_start_writes(graph.parents, stored, position, graph.closed, NOW))
    listed = set(graph.parents)
    finished = {s for s in graph.closed if s in stored and stored[s].shard_end}
    started: dict[str, ShardStart] = {}
    delivered: dict[str, set[str]] = {}
    done: set[str] = set()
    for _ in range(len(listed) + 1):
        done = set(finished)
        candidates = {s: p for s, p in graph.parents.items() if s not in done and s not in started}
        blocked = lineage.waiting_for_parents(candidates, listed, done)
        ready = {s: p for s, p in candidates.items() if s not in blocked}
        if not ready:
            break
        wanted = set(ready) | {p for ps in ready.values() for p in ps}
        view = {s: c for s, c in stored.items() if s in wanted}  # what resolve_starts loads
        starts = lineage.start_positions(ready, view, position, timestamp, closed=graph.closed)
        for shard, start in starts.items():
            if start.finished:
                finished.add(shard)
                continue
            if start.needs_pin:
                start = start.pin(NOW)
                stored[shard] = Checkpoint.at(shard, start.position)
            started[shard] = start
            got = selected(graph.records[shard], start.position)
            delivered[shard] = got
            if shard in graph.closed:  # read to its end: its end is stored, its children may be handed over
                last = max((graph.records[shard][label][0] for label in got), default=None)
                first = start.position.key
                key = SequenceKey(last, 0) if last is not None else (
                    SequenceKey(first.sequence, 0) if first is not None else None)
                stored[shard] = end_checkpoint(shard, start, key)
                finished.add(shard)
    assert listed <= done | set(started), f"shards never handed over: {listed - done - set(started)}"
    return delivered


def spark_delivers(graph: Graph, position: InitialPosition, timestamp: datetime | None) -> dict[str, set[str]]:
    """The Structured Streaming source's way: the first offset decides every listed shard at once; its first batch
    pins a symbolic LATEST to the time it runs."""
    config = SpoutConfig(stream_name="s", app_name="a", initial_position=position, initial_timestamp=timestamp)
    positions = initial_positions(graph.parents, graph.stored, config, closed=graph.closed)
    delivered: dict[str, set[str]] = {}
    for shard, pos in positions.items():
        if pos.unresolved:
            pos = at_timestamp(NOW - lineage.PIN_MARGIN)
        if pos.ended:
            continue
        delivered[shard] = selected(graph.records[shard], pos)
    return delivered


def union(delivered: dict[str, set[str]]) -> set[str]:
    return set().union(*delivered.values())


# -- the table ---------------------------------------------------------------------------------------------------
GRAPHS = {"split": SPLIT, "merge": MERGE, "split then merge": SPLIT_THEN_MERGE, "three generations": CHAIN}
FRESH = [(name, graph, position, when) for name, graph in GRAPHS.items()
         for position, when in [(InitialPosition.TRIM_HORIZON, None), (InitialPosition.LATEST, None),
                                (InitialPosition.AT_TIMESTAMP, at(3.5)), (InitialPosition.AT_TIMESTAMP, at(1.5)),
                                (InitialPosition.AT_TIMESTAMP, at(20))]]


@pytest.mark.parametrize("name,graph,position,when", FRESH,
                         ids=[f"{n}-{p.value}{'' if w is None else '-' + w.strftime('%M:%S')}"
                              for n, _, p, w in FRESH])
def test_with_nothing_stored_both_ways_deliver_what_the_initial_position_asks(
        name: str, graph: Graph, position: InitialPosition, when: datetime | None) -> None:
    """TRIM_HORIZON: every record, down the lineage. AT_TIMESTAMP T: the records that arrived at T or later, in
    closed shards and their descendants alike. LATEST: only the records that arrive after the start; closed shards
    are not read at all."""
    expected = {InitialPosition.TRIM_HORIZON: graph.labels(), InitialPosition.LATEST: graph.arrived_from(NOW),
                InitialPosition.AT_TIMESTAMP: graph.arrived_from(when or NOW)}[position]
    spout, spark = spout_delivers(graph, position, when), spark_delivers(graph, position, when)
    assert union(spout) == expected, f"spout on {name}"
    assert union(spark) == expected, f"Structured Streaming source on {name}"
    if position is InitialPosition.LATEST:
        assert not set(spout) & graph.closed, "the spout read a shard closed before it started at LATEST"


PIN = at(4.25)  # an earlier run pinned its start here (after the split, between B1 and C1) and read nothing
STORED = [
    # the app was reading the parent (after A1) when it stopped: the rest of it, then every record of its children
    ("split, parent read in part", with_stored(SPLIT, A=Checkpoint("A", "100")), {"A2", "B1", "B2", "C1", "C2"}),
    # the parent was read to its end: its children from their first record
    ("split, parent finished", with_stored(SPLIT, A=Checkpoint("A", "200", shard_end=True)),
     {"B1", "B2", "C1", "C2"}),
    # an earlier run pinned LATEST on the parent and stopped: a pin is taken on an open shard only, so the children
    # came after it and start at their first record (KCL: a child found later starts at TRIM_HORIZON)
    ("split, parent pinned", with_stored(SPLIT, A=Checkpoint.pinned("A", PIN)), {"B1", "B2", "C1", "C2"}),
    ("split, parent ended at its pin", with_stored(
        SPLIT, A=Checkpoint("A", None, shard_end=True, reset_to=AT_TIMESTAMP_NAME, timestamp=PIN)), {"C1", "B2", "C2"}),
    # one child has its own checkpoint: it wins; the other follows the parent
    ("split, parent pinned, a child read", with_stored(
        SPLIT, A=Checkpoint.pinned("A", PIN), B=Checkpoint("B", "100")), {"B2", "C1", "C2"}),
    # the parent aged out of the listing; its stored state still decides
    ("split, pinned parent aged out", without(
        SPLIT, "A", A=Checkpoint("A", None, shard_end=True, reset_to=AT_TIMESTAMP_NAME, timestamp=PIN)),
     {"C1", "B2", "C2"}),
    ("split, finished parent aged out", without(SPLIT, "A", A=Checkpoint("A", "200", shard_end=True)),
     {"B1", "B2", "C1", "C2"}),
    # a merge of a finished parent and one aged out unread: the merged child from its first record
    ("merge, one parent finished, the other aged out", without(MERGE, "B", A=Checkpoint("A", "100", shard_end=True)),
     {"C1", "C2"}),
    ("merge, both parents pinned", with_stored(
        MERGE, A=Checkpoint.pinned("A", at(3.5)), B=Checkpoint.pinned("B", at(4.5))), {"C1", "C2"}),
    ("merge, both parents pinned after the merged child's first record", with_stored(
        MERGE, A=Checkpoint.pinned("A", at(4.5)), B=Checkpoint.pinned("B", at(5))), {"C1", "C2"}),
    # three generations, the first pinned by an earlier run: everything below it, from the first record
    ("three generations, first pinned", with_stored(CHAIN, A=Checkpoint.pinned("A", at(7.25))),
     {"B1", "C1", "C2", "D1", "F1", "F2", "G1", "G2", "H1", "H2"}),
    # three generations, the middle one read in part: the rest of it and everything below; its sibling by the pin
    ("three generations, middle read, first pinned", with_stored(
        CHAIN, A=Checkpoint("A", None, shard_end=True, reset_to=AT_TIMESTAMP_NAME, timestamp=at(4.25)),
        B=Checkpoint("B", "0")), {"B1", "C1", "C2", "D1", "F1", "F2", "G1", "G2", "H1", "H2"}),
]


@pytest.mark.parametrize("name,graph,expected", STORED, ids=[s[0] for s in STORED])
@pytest.mark.parametrize("position,when", [(InitialPosition.TRIM_HORIZON, None), (InitialPosition.LATEST, None),
                                           (InitialPosition.AT_TIMESTAMP, at(2.5))],
                         ids=["TRIM_HORIZON", "LATEST", "AT_TIMESTAMP"])
def test_stored_checkpoints_and_pins_decide_down_the_lineage_the_same_both_ways(
        name: str, graph: Graph, expected: set[str], position: InitialPosition, when: datetime | None) -> None:
    """Where the app has stored state the initial position does not matter: a checkpoint resumes, a followed
    parent's children start at their first record, a pinned parent's children at the pin."""
    spout, spark = spout_delivers(graph, position, when), spark_delivers(graph, position, when)
    assert union(spout) == expected, f"spout on {name}"
    assert union(spark) == expected, f"Structured Streaming source on {name}"


def test_a_child_found_after_its_pinned_parent_was_read_to_its_end_starts_at_its_first_record() -> None:
    """A live reshard: the app pinned LATEST on an open shard, then the shard was split. Whether it read records of
    it or none, its end hands TRIM_HORIZON down (KCL's rule: the children were created while the app read the
    parent), so a pin taken by a clock ahead of Kinesis' skips none of the children's first records."""
    starts = lineage.start_positions({"B": ("A",)}, {"A": Checkpoint("A", "200", shard_end=True)},
                                     InitialPosition.LATEST, closed=frozenset())
    assert starts["B"].position == TRIM_HORIZON and starts["B"].durable
    pinned_open = lineage.start_positions({"A": ()}, {"A": Checkpoint.pinned("A", PIN)}, InitialPosition.LATEST,
                                          closed={"A"})["A"]
    read_nothing = lineage.end_checkpoint("A", pinned_open, None)
    assert read_nothing == Checkpoint("A", None, shard_end=True)
    child = lineage.start_positions({"B": ("A",)}, {"A": read_nothing}, InitialPosition.LATEST)["B"]
    assert child.position == TRIM_HORIZON
    # the pin itself, before the parent's end is stored (the Structured Streaming source's first offset)
    assert lineage.start_positions({"B": ("A",)}, {"A": Checkpoint.pinned("A", PIN)},
                                   InitialPosition.LATEST)["B"].position == TRIM_HORIZON
    read_some = lineage.end_checkpoint("A", pinned_open, SequenceKey(200, 0))
    assert read_some == Checkpoint("A", "200", shard_end=True)


def test_a_shard_closed_when_its_start_time_was_decided_hands_the_time_down() -> None:
    """AT_TIMESTAMP on a lineage that ended before the app started: the closed parent is read from the time, has
    nothing after it, and its end keeps the time for its children."""
    start = lineage.start_positions({"A": ()}, {}, InitialPosition.AT_TIMESTAMP, PIN, closed={"A"})["A"]
    assert (start.position, start.needs_pin) == (at_timestamp(PIN), False)
    end = lineage.end_checkpoint("A", start, None)
    assert (end.shard_end, end.sequence_number, end.reset_to, end.timestamp) == (True, None, AT_TIMESTAMP_NAME, PIN)
    child = lineage.start_positions({"B": ("A",)}, {"A": end}, InitialPosition.TRIM_HORIZON)["B"]
    assert child.position == at_timestamp(PIN)


def test_closed_shards_are_not_read_at_the_first_start_at_latest_but_their_open_children_are_at_once() -> None:
    never = lineage.never_read(CHAIN.parents, CHAIN.closed, {}, InitialPosition.LATEST, first_start=True)
    assert never == {"A", "B", "D"}
    assert lineage.never_read(CHAIN.parents, CHAIN.closed, {}, InitialPosition.TRIM_HORIZON, first_start=True) == \
        set()
    assert lineage.never_read(CHAIN.parents, CHAIN.closed, {}, InitialPosition.AT_TIMESTAMP, at(3),
                              first_start=True) == set()
    # a stored checkpoint anywhere up the lineage means the app follows it: nothing below is skipped
    assert lineage.never_read(CHAIN.parents, CHAIN.closed, {"A": Checkpoint("A", "100")},
                              InitialPosition.LATEST) == set()
    starts = lineage.start_positions(CHAIN.parents, {}, InitialPosition.LATEST, closed=CHAIN.closed,
                                     first_start=True)
    assert {s for s, st in starts.items() if st.position == LATEST and st.needs_pin} == {"C", "F", "G", "H"}
    # what the first start stores: a pin on every open shard, a never-read mark on every closed one
    writes = lineage.first_start_writes(CHAIN.parents, {}, InitialPosition.LATEST, CHAIN.closed, NOW)
    assert {s for s, c in writes.items() if c == lineage.never_read_checkpoint(s)} == {"A", "B", "D"}
    assert {s: c.timestamp for s, c in writes.items() if not c.shard_end} == \
        {s: NOW - lineage.PIN_MARGIN for s in ("C", "F", "G", "H")}
    assert lineage.first_start_writes(CHAIN.parents, {"C": Checkpoint.pinned("C", NOW)}, InitialPosition.LATEST,
                                      CHAIN.closed, NOW) == {}, "only the app's first start writes"


def test_a_shard_open_at_the_first_start_at_latest_and_closed_before_its_owner_read_it_is_read() -> None:
    """The app started at LATEST while P was open; P's owner had not pinned it when P was split. P is read (from
    its first record: its start was never stored) and its children after it, so nothing after the start is lost;
    P is not taken for a shard closed before the start."""
    graph = {"P": (), "Q": (), "C": ("P",), "D": ("P",)}
    first = lineage.first_start_writes({"P": (), "Q": ()}, {}, InitialPosition.LATEST, (), NOW)
    assert set(first) == {"P", "Q"}, "the first start pins every open shard, owned or not"
    lost_pin = {"Q": first["Q"]}  # P's pin was never written: the only way it can lack one
    starts = lineage.start_positions(graph, lost_pin, InitialPosition.LATEST, closed={"P"})
    assert starts["P"].position == TRIM_HORIZON, starts["P"]
    assert lineage.never_read(graph, {"P"}, lost_pin, InitialPosition.LATEST) == set()
    end = lineage.end_checkpoint("P", starts["P"], SequenceKey(300, 0))
    assert lineage.start_positions(graph, {**lost_pin, "P": end}, InitialPosition.LATEST,
                                   closed={"P"})["C"].position == TRIM_HORIZON
