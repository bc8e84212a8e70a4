"""The lineage rule (where each shard starts), with the exact answer of each rule (every field of a ShardStart, the
reason too: it is what the logs say about a shard's start) and its description; stable shard ownership. Pure logic,
no servers."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.config import InitialPosition
from kinesis_spout.coordination.lineage import (
    PIN_MARGIN,
    ShardStart,
    end_checkpoint,
    from_checkpoint,
    handed_down,
    never_read,
    start_positions,
)
from kinesis_spout.errors import CheckpointError
from kinesis_spout.kinesis.shards import Shard, owned_shards, task_of
from kinesis_spout.positions import LATEST, TRIM_HORIZON, after, at_timestamp, shard_end
from kinesis_spout.records import WHOLE, SequenceKey

SEQ = "49590338271490256608559692538361571095921575989136588898"  # 56 digits
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)
END = shard_end(SequenceKey(int(SEQ), WHOLE))  # the end of a shard whose last record read was SEQ


def test_a_stored_checkpoint_wins_over_everything() -> None:
    stored = {"s1": Checkpoint("s1", SEQ, 3), "s2": Checkpoint("s2", SEQ, shard_end=True),
              "s3": Checkpoint.pinned("s3", T0), "s4": Checkpoint("s4", None, reset_to="TRIM_HORIZON"),
              "s5": Checkpoint("s5", SEQ)}
    starts = start_positions({s: () for s in stored}, stored, InitialPosition.LATEST)
    # inside a KPL aggregate: read it again, skipping its user records up to 3
    assert starts["s1"].position == after(SEQ, 3)
    assert starts["s5"].position == after(SEQ)
    assert starts["s2"].finished and starts["s2"].position == shard_end(SequenceKey(int(SEQ), WHOLE))
    assert (starts["s3"].position, starts["s3"].needs_pin) == (at_timestamp(T0), False)
    assert starts["s4"].position == TRIM_HORIZON


@pytest.mark.parametrize("parent_checkpoint", [
    Checkpoint("p", SEQ, shard_end=True), Checkpoint("p", SEQ),
    Checkpoint("p", None, shard_end=True), Checkpoint("p", None, reset_to="TRIM_HORIZON"),
])
def test_a_child_of_a_followed_parent_starts_at_trim_horizon_whether_or_not_the_parent_is_listed(
        parent_checkpoint: Checkpoint) -> None:
    """The parent's checkpoint decides, not ListShards: a parent past the retention is no longer listed."""
    starts = start_positions({"child": ("p",)}, {"p": parent_checkpoint}, InitialPosition.LATEST)
    assert starts["child"].position == TRIM_HORIZON and starts["child"].reason == "child of a reshard"
    merged = start_positions({"child": ("gone", "p")}, {"p": parent_checkpoint}, InitialPosition.LATEST)
    assert merged["child"].position == TRIM_HORIZON  # a merge: either parent followed is enough


def test_a_child_of_a_parent_ended_at_its_start_time_starts_at_that_time_listed_or_not() -> None:
    """An end that kept its start time (a shard closed when its start was decided, nothing after it) hands the
    time down: the child's records before it are not delivered. A pin not ended was taken on an open shard: the
    children came after it and start at TRIM_HORIZON."""
    parent_checkpoint = Checkpoint("p", None, shard_end=True, reset_to="AT_TIMESTAMP", timestamp=T0)
    for position in InitialPosition:
        starts = start_positions({"child": ("p",)}, {"p": parent_checkpoint}, position, T0)
        assert (starts["child"].position, starts["child"].durable) == (at_timestamp(T0), True)
        pinned = start_positions({"child": ("p",)}, {"p": Checkpoint.pinned("p", T0)}, position, T0)
        assert pinned["child"].position == TRIM_HORIZON
    earlier_end = Checkpoint("q", None, shard_end=True, reset_to="AT_TIMESTAMP", timestamp=T0 - HOUR)
    earlier = start_positions({"child": ("p", "q")}, {"p": parent_checkpoint, "q": earlier_end},
                              InitialPosition.LATEST)
    # a merge: the earlier time, so neither parent's is skipped
    assert earlier["child"].position == at_timestamp(T0 - HOUR)
    followed = start_positions({"child": ("p", "q")}, {"p": parent_checkpoint, "q": Checkpoint("q", SEQ)},
                               InitialPosition.LATEST)
    assert followed["child"].position == TRIM_HORIZON  # a parent the app read: the child from its first record


def test_a_parent_reset_to_latest_hands_latest_down_and_one_never_read_leaves_the_initial_position() -> None:
    reset = start_positions({"child": ("p",)}, {"p": Checkpoint("p", None, reset_to="LATEST")},
                            InitialPosition.TRIM_HORIZON)
    assert reset["child"].position == LATEST and reset["child"].needs_pin  # the reset asked to skip the data
    unread = start_positions({"child": ("p",)}, {}, InitialPosition.AT_TIMESTAMP, T0)
    assert (unread["child"].position, unread["child"].needs_pin) == (at_timestamp(T0), True)
    fresh = start_positions({"child": ("p",)}, {}, InitialPosition.TRIM_HORIZON)
    assert fresh["child"].position == TRIM_HORIZON and not fresh["child"].needs_pin


def test_every_shard_is_decided_from_the_same_stored_state() -> None:
    """A new app with LATEST on a stream with a closed parent: parent and child both start at LATEST (pinned later),
    the child does not turn to TRIM_HORIZON because the parent's pin was written first."""
    starts = start_positions({"p": (), "child": ("p",)}, {}, InitialPosition.LATEST)
    assert starts["p"].position == starts["child"].position == LATEST


def test_pinning_latest_takes_the_margin_and_keeps_a_configured_timestamp() -> None:
    latest = start_positions({"s": ()}, {}, InitialPosition.LATEST)["s"]
    pinned = latest.pin(T0)
    assert (pinned.position, pinned.durable, pinned.needs_pin) == (at_timestamp(T0 - PIN_MARGIN), True, False)
    configured = start_positions({"s": ()}, {}, InitialPosition.AT_TIMESTAMP, T0)["s"].pin(T0 + timedelta(hours=1))
    assert configured.position == at_timestamp(T0)


def test_a_pinned_start_round_trips_through_the_stored_json() -> None:
    stored = Checkpoint.pinned("s", T0).stamped("w1")
    back = Checkpoint.from_json("s", stored.to_json(), "here")
    assert (back.sequence_number, back.reset_to, back.timestamp, back.key) == (None, "AT_TIMESTAMP", T0, None)
    assert Checkpoint("s", "1").is_behind(Checkpoint("s", "2")) and not back.is_behind(Checkpoint("s", None,
                                                                                                   reset_to="LATEST"))
    assert Checkpoint.pinned("s", T0).is_behind(Checkpoint("s", SEQ))  # a pin never overwrites a real checkpoint


@pytest.mark.parametrize("doc", [
    b'{"version":1,"sequence_number":null,"reset_to":"AT_TIMESTAMP"}',
    b'{"version":1,"sequence_number":null,"reset_to":"AT_TIMESTAMP","timestamp":"yesterday"}',
    b'{"version":1,"sequence_number":"5","timestamp":"2026-11-22T12:00:00+00:00"}',
])
def test_a_malformed_pin_is_a_checkpoint_error_naming_the_place(doc: bytes) -> None:
    with pytest.raises(CheckpointError, match="znode /x"):
        Checkpoint.from_json("s", doc, "znode /x")


def _shard(number: int) -> Shard:
    return Shard(f"shardId-{number:012d}", None, None, "0", None)


def test_ownership_depends_on_the_shard_alone_so_an_expired_shard_moves_nobody() -> None:
    """Positional ownership moved every shard after the first one to expire; the shard number does not."""
    shards = [_shard(n) for n in range(8)]
    before = {t: [s.shard_id for s in owned_shards(shards, t, 3)] for t in range(3)}
    after = {t: [s.shard_id for s in owned_shards(shards[1:], t, 3)] for t in range(3)}
    for task in range(3):
        assert after[task] == [s for s in before[task] if s != shards[0].shard_id]
    assert sorted(sum(before.values(), [])) == sorted(s.shard_id for s in shards)  # each shard has one owner
    assert [len(v) for v in before.values()] == [3, 3, 2]  # sequential shard numbers spread evenly
    assert task_of("my-shard", 4) == task_of("my-shard", 4) in range(4)  # ids without a number still map


# ------------------------------------------------------------------ each rule's exact answer


def test_each_kind_of_stored_checkpoint_gives_its_exact_start() -> None:
    assert from_checkpoint(Checkpoint("s", SEQ, 4, shard_end=True)) == ShardStart(
        END, reason="finished earlier", durable=True)
    assert from_checkpoint(Checkpoint("s", SEQ, 7)) == ShardStart(
        after(SEQ, 7), reason="checkpoint inside an aggregate", durable=True)
    assert from_checkpoint(Checkpoint("s", SEQ)) == ShardStart(
        after(SEQ), reason="checkpoint", durable=True)
    assert from_checkpoint(Checkpoint.pinned("s", T0)) == ShardStart(
        at_timestamp(T0), reason="pinned start", durable=True)
    assert from_checkpoint(Checkpoint("s", None, reset_to="LATEST")) == ShardStart(
        LATEST, reason="reset", durable=False)
    assert from_checkpoint(Checkpoint("s", None, reset_to="TRIM_HORIZON")) == ShardStart(
        TRIM_HORIZON, reason="reset", durable=True)


def test_start_positions_give_the_exact_start_of_each_rule() -> None:
    parents = {"stored": [], "child": ["parent"], "free": []}
    stored = {"stored": Checkpoint("stored", SEQ), "parent": Checkpoint("parent", SEQ, shard_end=True)}
    starts = start_positions(parents, stored, InitialPosition.AT_TIMESTAMP, T0)
    assert starts == {
        "stored": ShardStart(after(SEQ), reason="checkpoint"),
        "child": ShardStart(TRIM_HORIZON, reason="child of a reshard", durable=True),
        "free": ShardStart(at_timestamp(T0), reason="initial position", durable=False),
    }
    assert start_positions({"free": []}, {}, InitialPosition.LATEST)["free"] == ShardStart(
        LATEST, reason="initial position", durable=False)
    assert start_positions({"free": []}, {}, InitialPosition.TRIM_HORIZON)["free"] == ShardStart(
        TRIM_HORIZON, reason="initial position", durable=True)


def test_pin_makes_latest_a_durable_timestamp_with_the_margin_and_keeps_everything_else() -> None:
    latest = ShardStart(LATEST, reason="initial position", durable=False)
    assert latest.needs_pin
    assert latest.pin(T0) == ShardStart(at_timestamp(T0 - PIN_MARGIN), reason="initial position",
                                        durable=True)
    configured = ShardStart(at_timestamp(T0), reason="initial position", durable=False)
    assert configured.pin(T0 + PIN_MARGIN * 10) == ShardStart(at_timestamp(T0), reason="initial position",
                                                              durable=True)


def test_describe_names_the_position_and_the_reason() -> None:
    assert ShardStart(after(SEQ), reason="checkpoint").describe() == f"after {SEQ} (checkpoint)"
    assert ShardStart(after(SEQ, 3), reason="in").describe() == f"at {SEQ}, after its user record 3 (in)"
    assert ShardStart(at_timestamp(T0), reason="pinned start").describe() == (
        f"AT_TIMESTAMP {T0.isoformat()} (pinned start)")
    assert ShardStart(TRIM_HORIZON, reason="reset").describe() == "TRIM_HORIZON (reset)"
    assert ShardStart(END, reason="finished earlier").describe() == "SHARD_END (finished earlier)"


def test_each_stored_parent_checkpoint_hands_down_its_exact_start() -> None:
    assert handed_down(Checkpoint("p", SEQ)) == ShardStart(TRIM_HORIZON, reason="child of a reshard")
    assert handed_down(Checkpoint("p", SEQ, shard_end=True)) == ShardStart(TRIM_HORIZON, reason="child of a reshard")
    assert handed_down(Checkpoint("p", None, shard_end=True)) == ShardStart(TRIM_HORIZON, reason="child of a reshard")
    assert handed_down(Checkpoint("p", None, reset_to="TRIM_HORIZON")) == ShardStart(
        TRIM_HORIZON, reason="child of a reshard")
    assert handed_down(Checkpoint.pinned("p", T0)) == ShardStart(TRIM_HORIZON, reason="child of a reshard")
    assert handed_down(Checkpoint("p", None, shard_end=True, reset_to="AT_TIMESTAMP", timestamp=T0)) == ShardStart(
        at_timestamp(T0), reason="child of a pinned shard", durable=True)
    assert handed_down(Checkpoint("p", None, reset_to="LATEST")) == ShardStart(
        LATEST, reason="child of a shard started at LATEST", durable=False)
    # a shard closed before the app first started at LATEST, stored so (never read): its children start at LATEST
    assert handed_down(Checkpoint("p", None, shard_end=True, reset_to="LATEST")) == ShardStart(
        LATEST, reason="child of a shard started at LATEST", durable=False)


def test_a_whole_listing_decided_at_once_hands_each_decision_down() -> None:
    """p (closed) -> c (closed) -> g (open); q (closed, checkpoint) -> r (open)."""
    parents = {"p": (), "c": ("p",), "g": ("c",), "q": (), "r": ("q",)}
    stored = {"q": Checkpoint("q", SEQ)}
    latest = start_positions(parents, stored, InitialPosition.LATEST, closed={"p", "c", "q"}, first_start=True)
    assert latest == {
        "p": ShardStart(shard_end(then=LATEST), reason="closed before the app started at LATEST", closed=True),
        "c": ShardStart(shard_end(then=LATEST), reason="closed before the app started at LATEST", closed=True),
        "g": ShardStart(LATEST, reason="child of a shard started at LATEST", durable=False),
        "q": ShardStart(after(SEQ), reason="checkpoint"),
        "r": ShardStart(TRIM_HORIZON, reason="child of a reshard"),
    }
    assert never_read(parents, {"p", "c", "q"}, stored, InitialPosition.LATEST, first_start=True) == {"p", "c"}
    later = start_positions(parents, stored, InitialPosition.LATEST, closed={"p", "c", "q"})
    assert later["p"] == ShardStart(TRIM_HORIZON, reason="closed, its LATEST start never stored: read from its "
                                                         "first record", closed=True)
    assert later["c"] == ShardStart(TRIM_HORIZON, reason="child of a reshard", closed=True)
    at = start_positions(parents, stored, InitialPosition.AT_TIMESTAMP, T0, closed={"p", "c", "q"})
    assert at["c"] == ShardStart(at_timestamp(T0), reason="child of a pinned shard", durable=False,
                                 closed=True)
    assert at["g"] == ShardStart(at_timestamp(T0), reason="child of a pinned shard", durable=False)
    horizon = start_positions(parents, {}, InitialPosition.TRIM_HORIZON, closed={"p", "c", "q"})
    assert horizon["g"] == ShardStart(TRIM_HORIZON, reason="child of a reshard")


def test_a_merge_takes_the_earlier_of_its_parents_starts() -> None:
    later = Checkpoint("a", None, shard_end=True, reset_to="AT_TIMESTAMP", timestamp=T0 + PIN_MARGIN)
    earlier = Checkpoint("b", None, shard_end=True, reset_to="AT_TIMESTAMP", timestamp=T0)
    for order in (("a", "b"), ("b", "a")):
        child = start_positions({"m": order}, {"a": later, "b": earlier}, InitialPosition.LATEST)["m"]
        assert child.position == at_timestamp(T0)
        reset = start_positions({"m": order}, {"a": later, "b": Checkpoint("b", None, reset_to="LATEST")},
                                InitialPosition.LATEST)["m"]
        assert reset.position == at_timestamp(T0 + PIN_MARGIN)
        read = start_positions({"m": order}, {"a": later, "b": Checkpoint("b", SEQ)}, InitialPosition.LATEST)["m"]
        assert read.position == TRIM_HORIZON


def test_an_end_keeps_the_pin_only_when_nothing_was_read_after_it() -> None:
    pinned = ShardStart(at_timestamp(T0), reason="initial position", closed=True)
    assert end_checkpoint("s", pinned, None) == Checkpoint("s", None, shard_end=True, reset_to="AT_TIMESTAMP",
                                                           timestamp=T0)
    followed_open = ShardStart(at_timestamp(T0), reason="pinned start")
    assert end_checkpoint("s", followed_open, None) == Checkpoint("s", None, shard_end=True)
    assert end_checkpoint("s", pinned, SequenceKey(int(SEQ), 2)) == Checkpoint("s", SEQ, shard_end=True)
    assert end_checkpoint("s", ShardStart(TRIM_HORIZON), None) == Checkpoint("s", None, shard_end=True)
