"""The lineage rule's exact answers: every field of each ShardStart (the reason too, it is what the logs say about a
shard's start) and its description. Written against mutants the other tests let survive."""

from __future__ import annotations

from datetime import datetime, timezone

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
from kinesis_spout.positions import LATEST, TRIM_HORIZON, after, at_timestamp, shard_end
from kinesis_spout.records import WHOLE, SequenceKey

SEQ = "49590338271490256608559692538361571095921575989136588898"
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
END = shard_end(SequenceKey(int(SEQ), WHOLE))  # the end of a shard whose last record read was SEQ


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
