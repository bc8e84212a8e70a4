"""The lineage rule's exact answers: every field of each ShardStart (the reason too, it is what the logs say about a
shard's start) and its description. Written against mutants the other tests let survive."""

from __future__ import annotations

from datetime import datetime, timezone

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.config import InitialPosition
from kinesis_spout.coordination.lineage import (
    AFTER_SEQUENCE_NUMBER,
    AT_SEQUENCE_NUMBER,
    AT_TIMESTAMP,
    LATEST,
    PIN_MARGIN,
    SHARD_END,
    TRIM_HORIZON,
    ShardStart,
    from_checkpoint,
    start_positions,
)

SEQ = "49590338271490256608559692538361571095921575989136588898"
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def test_each_kind_of_stored_checkpoint_gives_its_exact_start() -> None:
    assert from_checkpoint(Checkpoint("s", SEQ, 4, shard_end=True)) == ShardStart(
        SHARD_END, SEQ, 4, reason="finished earlier", durable=True)
    assert from_checkpoint(Checkpoint("s", SEQ, 7)) == ShardStart(
        AT_SEQUENCE_NUMBER, SEQ, 7, reason="checkpoint inside an aggregate", durable=True)
    assert from_checkpoint(Checkpoint("s", SEQ)) == ShardStart(
        AFTER_SEQUENCE_NUMBER, SEQ, None, reason="checkpoint", durable=True)
    assert from_checkpoint(Checkpoint.pinned("s", T0)) == ShardStart(
        AT_TIMESTAMP, timestamp=T0, reason="pinned start", durable=True)
    assert from_checkpoint(Checkpoint("s", None, reset_to=LATEST)) == ShardStart(
        LATEST, reason="reset", durable=False)
    assert from_checkpoint(Checkpoint("s", None, reset_to=TRIM_HORIZON)) == ShardStart(
        TRIM_HORIZON, reason="reset", durable=True)


def test_start_positions_give_the_exact_start_of_each_rule() -> None:
    parents = {"stored": [], "child": ["parent"], "free": []}
    stored = {"stored": Checkpoint("stored", SEQ), "parent": Checkpoint("parent", SEQ, shard_end=True)}
    starts = start_positions(parents, stored, InitialPosition.AT_TIMESTAMP, T0)
    assert starts == {
        "stored": ShardStart(AFTER_SEQUENCE_NUMBER, SEQ, None, reason="checkpoint"),
        "child": ShardStart(TRIM_HORIZON, reason="child of a reshard", durable=True),
        "free": ShardStart(AT_TIMESTAMP, timestamp=T0, reason="initial position", durable=False),
    }
    assert start_positions({"free": []}, {}, InitialPosition.LATEST)["free"] == ShardStart(
        LATEST, reason="initial position", durable=False)
    assert start_positions({"free": []}, {}, InitialPosition.TRIM_HORIZON)["free"] == ShardStart(
        TRIM_HORIZON, reason="initial position", durable=True)


def test_pin_makes_latest_a_durable_timestamp_with_the_margin_and_keeps_everything_else() -> None:
    latest = ShardStart(LATEST, reason="initial position", durable=False)
    assert latest.needs_pin
    assert latest.pin(T0) == ShardStart(AT_TIMESTAMP, timestamp=T0 - PIN_MARGIN, reason="initial position",
                                        durable=True)
    configured = ShardStart(AT_TIMESTAMP, timestamp=T0, reason="initial position", durable=False)
    assert configured.pin(T0 + PIN_MARGIN * 10) == ShardStart(AT_TIMESTAMP, timestamp=T0, reason="initial position",
                                                              durable=True)


def test_describe_names_the_position_and_the_reason() -> None:
    assert ShardStart(AFTER_SEQUENCE_NUMBER, SEQ, None, reason="checkpoint").describe() == f"after {SEQ} (checkpoint)"
    assert ShardStart(AT_SEQUENCE_NUMBER, SEQ, 3, reason="in").describe() == f"at {SEQ}, after its user record 3 (in)"
    assert ShardStart(AT_TIMESTAMP, timestamp=T0, reason="pinned start").describe() == (
        f"AT_TIMESTAMP {T0.isoformat()} (pinned start)")
    assert ShardStart(TRIM_HORIZON, reason="reset").describe() == "TRIM_HORIZON (reset)"
    assert ShardStart(SHARD_END, SEQ, reason="finished earlier").describe() == "SHARD_END (finished earlier)"
