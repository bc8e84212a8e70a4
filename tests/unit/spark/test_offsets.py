"""The source's pure logic: options, shard positions and offsets (exactly: a finished position keeps everything it
knew, a position inside an aggregate its user record), admission control, AvailableNow cut, reshards."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from kinesis_spout import CheckpointError, ConfigError, InitialPosition
from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.positions import (
    LATEST,
    SHARD_END,
    TRIM_HORIZON,
    IteratorArgs,
    Kind,
    Position,
    after,
    at_timestamp,
    iterator_args,
    shard_end,
)
from kinesis_spout.records import WHOLE, SequenceKey
from kinesis_spout.spark.source.offsets import (
    SourceLimits,
    allocate,
    as_checkpoint,
    consumed,
    encode_offset,
    end_after,
    first_after,
    in_range,
    initial_positions,
    parse_offset,
    parse_source_options,
    range_is_empty,
    unused_options,
    waiting_for_parents,
)

BIG = "49590338271490256608559692538361571095921575989136588898"  # 56 digits, as Kinesis has them
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


# -- options ---------------------------------------------------------------------------------------------------
def test_options_arrive_lower_cased_from_spark_and_still_map_onto_the_config() -> None:
    config, limits = parse_source_options({"streamname": "s", "appname": "a", "initialposition": "trim_horizon",
                                           "checkpointintervals": "0", "maxrecordspertrigger": "500"})
    assert (config.stream_name, config.app_name) == ("s", "a")
    assert config.initial_position is InitialPosition.TRIM_HORIZON and config.checkpoint_interval_s == 0.0
    assert limits == SourceLimits(max_records=500, max_bytes=None)


def test_source_only_options_are_taken_out_before_the_config_parser() -> None:
    config, limits = parse_source_options({"streamName": "s", "appName": "a", "maxBytesPerTrigger": "1_048_576",
                                           "maxRecordsPerTrigger": "10", "recordsperpartition": "2000"})
    assert limits == SourceLimits(max_records=10, max_bytes=1 << 20, records_per_partition=2000)
    assert config.stream_name == "s"


@pytest.mark.parametrize("name, value", [("maxRecordsPerTrigger", "0"), ("maxBytesPerTrigger", "-5"),
                                         ("maxrecordspertrigger", "lots"), ("maxBytesPerTrigger", "1.5"),
                                         ("recordsPerPartition", "0")])
def test_bad_limits_are_config_errors_naming_the_option(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"option '{name[:3]}.*must be a whole number of at least 1"):
        parse_source_options({"streamName": "s", "appName": "a", name: value})


def test_spout_only_options_are_accepted_and_reported_as_unused() -> None:
    options = {"streamName": "s", "appName": "a", "retrylimit": "5", "reliable": "false", "region": "eu-west-1"}
    config, _ = parse_source_options(options)
    assert config.retry_limit == 5  # still validated by the one parser
    assert unused_options(options) == ["reliable", "retryLimit"]


def test_unknown_and_missing_options_are_reported_by_the_one_parser() -> None:
    with pytest.raises(ConfigError, match="unknown option 'streamname2'"):
        parse_source_options({"streamname2": "s", "appName": "a"})
    with pytest.raises(ConfigError, match="option 'appName' is required"):
        parse_source_options({"streamName": "s"})


def test_errors_name_the_option_as_the_user_typed_it_and_list_the_source_options() -> None:
    base = {"streamName": "s", "appName": "a"}
    with pytest.raises(ConfigError, match=r"^option 'initialPosition': initial_position must be one of"):
        parse_source_options({**base, "initialposition": "EARLIEST"})
    with pytest.raises(ConfigError, match=r"^option 'maxRecordsPerCall': max_records_per_call must be"):
        parse_source_options({**base, "maxRecordsPerCall": "0"})
    with pytest.raises(ConfigError, match=r"^option 'retryBackoffMaxS': RetryBackoff.max_s must be"):
        parse_source_options({**base, "retryBackoffMaxS": "-1"})
    with pytest.raises(ConfigError, match=r"unknown option 'maxRecordsPerTriggr': did you mean "
                                          r"'maxRecordsPerTrigger'\? Known options: .*"
                                          r"maxRecordsPerTrigger.*readMode.*startingTimestamp"):
        parse_source_options({**base, "maxRecordsPerTriggr": "5"})
    with pytest.raises(ConfigError, match=r"^option 'readMode' must be one of auto, driver, executors, got 'cluster'"):
        parse_source_options({**base, "readMode": "cluster"})


# -- positions and offsets -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["17", BIG, "TRIM_HORIZON", "LATEST", "SHARD_END", f"SHARD_END:{BIG}",
                                  "AT_TIMESTAMP:2026-01-31T12:00:00.250000+00:00"])
def test_positions_round_trip_through_their_string_form(text: str) -> None:
    position = Position.parse(text)
    assert position.encode() == text
    assert Position.parse(position.encode()) == position


@pytest.mark.parametrize("text", ["", "-1", "12a", "EARLIEST", "SHARD_END:x", "AT_TIMESTAMP:yesterday", 17, None])
def test_unreadable_positions_are_checkpoint_errors_naming_the_shard(text: object) -> None:
    with pytest.raises(CheckpointError, match="shard shardId-7"):
        parse_offset({"shardId-7": text}, "Spark offset")


def test_an_offset_that_is_not_an_object_says_where_it_came_from() -> None:
    with pytest.raises(CheckpointError, match="end offset: expected a JSON object"):
        parse_offset(["shardId-0"], "end offset")


def test_offsets_encode_in_shard_order_so_equal_offsets_compare_equal() -> None:
    a = encode_offset({"shardId-2": after("5"), "shardId-1": TRIM_HORIZON})
    assert list(a) == ["shardId-1", "shardId-2"] and a == {"shardId-1": "TRIM_HORIZON", "shardId-2": "5"}


def test_sequence_numbers_compare_as_integers_not_strings() -> None:
    nine, ten = after("9"), after("10")
    assert ten.is_beyond(nine) and not nine.is_beyond(ten)  # as strings "9" > "10"
    assert after(BIG).is_beyond(after(str(int(BIG) - 1)))
    assert in_range(SequenceKey(10), nine, ten) and not in_range(SequenceKey(9), nine, ten)
    assert not in_range(SequenceKey(11), nine, ten)


def test_shard_end_keeps_the_last_sequence_number() -> None:
    end = after("40").finished()
    assert end.ended and end.encode() == "SHARD_END:40"
    assert range_is_empty(after("40"), end)  # closed with nothing new
    assert not range_is_empty(after("39"), end)


def test_ranges_without_a_consumed_end_are_empty() -> None:
    stamp = at_timestamp(datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert range_is_empty(LATEST, stamp)
    assert range_is_empty(TRIM_HORIZON, SHARD_END)
    assert not range_is_empty(TRIM_HORIZON, after("1"))
    assert in_range(SequenceKey(1), TRIM_HORIZON, after("1"))


# -- admission control ---------------------------------------------------------------------------------------------
def test_no_limit_admits_everything() -> None:
    assert allocate({"a": [1] * 7, "b": [], "c": [5]}, None, None) == {"a": 7, "b": 0, "c": 1}


def test_a_record_limit_is_shared_round_robin_across_shards() -> None:
    assert allocate({"a": [1] * 10, "b": [1] * 10, "c": [1] * 2}, 9, None) == {"a": 4, "b": 3, "c": 2}


def test_a_byte_limit_stops_at_the_first_record_that_would_pass_it() -> None:
    assert allocate({"a": [40, 40, 40], "b": [30, 30]}, None, 100) == {"a": 1, "b": 1}
    assert allocate({"a": [40, 40, 40], "b": [30, 30]}, None, 139) == {"a": 2, "b": 1}
    assert allocate({"a": [40, 40, 40], "b": [30, 30]}, None, 140) == {"a": 2, "b": 2}


def test_both_limits_apply_together() -> None:
    sizes = {"a": [10] * 50}
    assert allocate(sizes, 20, 1000)["a"] == 20
    assert allocate(sizes, 200, 95)["a"] == 9


def test_the_first_record_is_admitted_even_when_larger_than_the_byte_limit() -> None:
    assert allocate({"a": [5000, 1]}, None, 100) == {"a": 1}


# -- AvailableNow and reshards ---------------------------------------------------------------------------------------
def test_first_after_finds_the_first_record_past_the_cutoff() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    stamps = [t0 - timedelta(seconds=2), None, t0, t0 + timedelta(milliseconds=1), t0 - timedelta(seconds=5)]
    assert first_after(stamps, t0) == 3
    assert first_after(stamps[:3], t0) is None


def test_children_wait_until_their_listed_parents_are_read_to_their_end() -> None:
    parents = {"p": (), "c1": ("p",), "c2": ("p", "q"), "orphan": ("gone",)}
    listed = ["p", "c1", "c2", "orphan", "q"]
    running = {"p": after("5"), "q": after("1").finished()}
    assert waiting_for_parents(parents, running, listed) == {"c1", "c2"}
    done = {**running, "p": after("9").finished()}
    assert waiting_for_parents(parents, done, listed) == set()
    # a parent not read yet holds its children back too
    assert waiting_for_parents(parents, {}, listed) == {"c1", "c2"}


# -- the stream reader's own pure parts (no servers: its constructor does no I/O) ------------------------------------
def test_both_readers_map_the_read_limits_and_pickle_with_their_configuration_only() -> None:
    """The limits the options set, as Spark's read limits and as a batch's budget; a reader's pickle is its
    configuration (no I/O, no client: see test_source_clients for readers in use)."""
    import pickle

    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows

    from kinesis_spout.spark.source import ExecutorStreamReader, KinesisSpoutStreamReader
    from kinesis_spout.spark.source.planning import read_budget

    for kind in (KinesisSpoutStreamReader, ExecutorStreamReader):
        reader = kind({"streamname": "s", "appname": "a", "maxbytespertrigger": "4096"})
        assert reader.getDefaultReadLimit() == ReadMaxBytes(4096)
        assert read_budget(ReadMaxBytes(4096), reader.limits) == (None, 4096)
        assert read_budget(ReadAllAvailable(), reader.limits) == (None, None)  # the engine's overrides options
        both = kind({"streamName": "s", "appName": "a", "maxRecordsPerTrigger": "9", "maxBytesPerTrigger": "100"})
        assert both.getDefaultReadLimit() == ReadMaxRows(9) and read_budget(ReadMaxRows(9), both.limits) == (9, 100)
        assert kind({"streamName": "s", "appName": "a"}).getDefaultReadLimit() == ReadAllAvailable()
        copy = pickle.loads(pickle.dumps(reader))
        assert (type(copy), copy.config.stream_name, copy.limits) == (kind, "s", reader.limits)
        reader.stop()
        reader.stop()  # idempotent, also when nothing was opened


def test_stored_checkpoints_map_onto_positions_and_positions_onto_iterators() -> None:
    from kinesis_spout import Checkpoint

    assert Checkpoint("s", BIG).position.encode() == BIG
    assert Checkpoint("s", "12", shard_end=True).position.encode() == "SHARD_END:12"
    assert Checkpoint("s", None, shard_end=True).position.encode() == "SHARD_END"
    assert Checkpoint("s", None, reset_to="LATEST").position.encode() == "LATEST"
    assert Checkpoint("s", None, reset_to="TRIM_HORIZON").position.encode() == "TRIM_HORIZON"
    assert iterator_args(after(BIG)) == IteratorArgs("AFTER_SEQUENCE_NUMBER", BIG)
    assert iterator_args(TRIM_HORIZON) == IteratorArgs("TRIM_HORIZON")
    when = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
    assert iterator_args(at_timestamp(when)) == IteratorArgs("AT_TIMESTAMP", timestamp=when)


def test_a_new_query_starts_at_checkpoints_then_children_of_read_parents_then_the_initial_position() -> None:
    from kinesis_spout import Checkpoint, SpoutConfig

    parents = {"p": (), "c": ("p",), "fresh": (), "orphan": ("never-read",), "reset": ()}
    stored = {"p": Checkpoint("p", "9", shard_end=True), "reset": Checkpoint("reset", None, reset_to="LATEST")}
    config = SpoutConfig(stream_name="s", app_name="a", initial_position=InitialPosition.AT_TIMESTAMP,
                         initial_timestamp=datetime(2026, 5, 1, tzinfo=timezone.utc))
    got = encode_offset(initial_positions(parents, stored, config))
    assert got == {"c": "TRIM_HORIZON", "fresh": "AT_TIMESTAMP:2026-05-01T00:00:00+00:00",
                   "orphan": "AT_TIMESTAMP:2026-05-01T00:00:00+00:00", "p": "SHARD_END:9", "reset": "LATEST"}
    assert Position.parse(got["reset"]).unresolved and not Position.parse(got["p"]).unresolved


def test_a_query_position_stands_for_the_checkpoint_the_lineage_rule_reads_of_a_parent() -> None:
    from kinesis_spout import Checkpoint
    from kinesis_spout.spark.source.offsets import as_checkpoint, lineage_checkpoint

    when = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
    ended_at_pin = shard_end(then=at_timestamp(when))
    assert as_checkpoint("p", ended_at_pin) == Checkpoint("p", None, shard_end=True, reset_to="AT_TIMESTAMP",
                                                          timestamp=when)
    # a shard the query read from a pin to its end hands its children TRIM_HORIZON (created while it was read)
    assert as_checkpoint("p", at_timestamp(when).finished()) == Checkpoint("p", None, shard_end=True)
    assert lineage_checkpoint("p", at_timestamp(when)) == Checkpoint.pinned("p", when)
    assert lineage_checkpoint("p", LATEST) == Checkpoint("p", None, reset_to="LATEST")
    assert lineage_checkpoint("p", TRIM_HORIZON) == Checkpoint(
        "p", None, reset_to="TRIM_HORIZON")
    assert lineage_checkpoint("p", after(BIG)) == Checkpoint("p", BIG)
    assert lineage_checkpoint("p", after(BIG).finished()) == Checkpoint("p", BIG, shard_end=True)


def test_a_new_query_at_latest_leaves_out_the_closed_shards_and_starts_their_children_at_latest() -> None:
    from kinesis_spout import Checkpoint, SpoutConfig
    from kinesis_spout.spark.source.offsets import as_checkpoint, lineage_checkpoint

    config = SpoutConfig(stream_name="s", app_name="a", initial_position=InitialPosition.LATEST)
    got = encode_offset(initial_positions({"p": (), "a": ("p",), "b": ("p",)}, {}, config, closed={"p"}))
    assert got == {"p": "SHARD_END@LATEST", "a": "LATEST", "b": "LATEST"}
    skipped = initial_positions({"p": ()}, {}, config, closed={"p"})["p"]
    never = Checkpoint("p", None, shard_end=True, reset_to="LATEST")  # an end whose children start at LATEST
    assert skipped.ended and as_checkpoint("p", skipped) == never
    assert lineage_checkpoint("p", skipped) == never
    # not the app's first start (a shard has a checkpoint): a closed shard without one was open when the app
    # started and its pin was never stored; it is read from its first record
    later = initial_positions({"p": (), "a": ("p",), "q": ()}, {"q": Checkpoint.pinned("q", T0)}, config,
                              closed={"p"})
    assert encode_offset(later)["p"] == "TRIM_HORIZON"
    assert as_checkpoint("p", SHARD_END) == Checkpoint("p", None, shard_end=True)  # read, empty


@pytest.mark.parametrize("position,text", [
    (shard_end(then=LATEST), "SHARD_END@LATEST"),
    (shard_end(then=at_timestamp(T0)), f"SHARD_END@AT_TIMESTAMP:{T0.isoformat()}"),
    (SHARD_END, "SHARD_END"),
    (after(BIG).finished(), f"SHARD_END:{BIG}"),
])
def test_an_end_keeps_what_it_hands_down_through_the_offset_string_to_zookeeper(
        position: Position, text: str) -> None:
    """What Spark stores (the offset string) and gives back to ``commit`` and to a restarted query must write the
    same ZooKeeper checkpoint as the position it was made from: a never-read end hands LATEST down, an end kept at
    its start time hands that time down, a plain end TRIM_HORIZON."""
    from kinesis_spout.spark.source.offsets import as_checkpoint

    assert encode_offset({"p": position}) == {"p": text}
    back = parse_offset(encode_offset({"p": position}))["p"]
    assert back == position
    assert as_checkpoint("p", back) == as_checkpoint("p", position)


def test_the_end_strings_of_earlier_versions_still_read() -> None:
    assert Position.parse("SHARD_END") == SHARD_END
    assert Position.parse(f"SHARD_END:{BIG}") == shard_end(SequenceKey(int(BIG), WHOLE))
    for bad in ("SHARD_END@", "SHARD_END@TRIM_HORIZON", f"SHARD_END@{BIG}", "SHARD_END@AT_TIMESTAMP:soon"):
        with pytest.raises(CheckpointError, match="SHARD_END@LATEST"):
            Position.parse(bad)


# -- exactly what a position keeps -----------------------------------------------------------------------------


def test_finished_marks_the_end_and_keeps_the_position() -> None:
    pinned = at_timestamp(T0)
    assert pinned.finished() == SHARD_END  # followed: TRIM_HORIZON down
    assert after("42").finished() == shard_end(SequenceKey(42, WHOLE))


def test_at_timestamp_keeps_an_aware_instant_and_reads_a_naive_time_as_utc() -> None:
    aware = datetime(2026, 11, 22, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert at_timestamp(aware).timestamp == T0
    assert at_timestamp(aware).timestamp.utcoffset() == timedelta(hours=2)  # type: ignore[union-attr]
    naive = at_timestamp(datetime(2026, 11, 22, 12, 0))
    assert naive.timestamp == T0 and naive.timestamp.tzinfo is timezone.utc


def test_a_limit_of_one_is_accepted() -> None:
    _, limits = parse_source_options({"streamName": "s", "appName": "a", "maxRecordsPerTrigger": "1"})
    assert limits.max_records == 1


def test_parse_names_the_offset_by_default_and_reads_shard_end_exactly() -> None:
    assert Position.parse("SHARD_END") == SHARD_END
    with pytest.raises(CheckpointError, match=r"^offset: unreadable shard position 'NOW:2026-11-22T12:00:00'"):
        Position.parse("NOW:2026-11-22T12:00:00")
    with pytest.raises(CheckpointError, match=r"^offset: expected a JSON object of shard positions"):
        parse_offset(["not", "an", "object"])


def test_as_checkpoint_stores_what_the_position_needs_and_nothing_else() -> None:
    assert as_checkpoint("s", after("42")) == Checkpoint("s", "42", None, shard_end=False)
    assert as_checkpoint("s", after("42").finished()) == Checkpoint("s", "42", None, shard_end=True)
    assert as_checkpoint("s", at_timestamp(T0)) == Checkpoint.pinned("s", T0)
    assert as_checkpoint("s", TRIM_HORIZON) is None
    with pytest.raises(ValueError):  # no position is TRIM_HORIZON with a time, or AT_TIMESTAMP without one
        Position(Kind.TRIM_HORIZON, timestamp=T0)
    with pytest.raises(ValueError):
        Position(Kind.AT_TIMESTAMP)


def test_a_start_inside_an_aggregate_becomes_a_position_inside_it_and_back_to_the_same_checkpoint() -> None:
    position = Checkpoint("s", "42", 3).position
    assert position == after("42", 3) and position.inside_aggregate
    assert position.encode() == "42:3" and Position.parse("42:3") == position
    assert as_checkpoint("s", position) == Checkpoint("s", "42", 3)
    assert Checkpoint("s", "42", 0).position.encode() == "42:0"


def test_positions_inside_an_aggregate_order_user_records_by_sub_sequence() -> None:
    inside, whole = after("42", 3), after("42")
    assert whole.is_beyond(inside) and not inside.is_beyond(whole)
    assert after("42", 4).is_beyond(inside) and not inside.is_beyond(after("42", 4))
    assert after("41").is_beyond(TRIM_HORIZON) and inside.is_beyond(after("41"))
    assert consumed(SequenceKey(42, 3), inside) and not consumed(SequenceKey(42, 4), inside)
    assert consumed(SequenceKey(42, 99), whole) and not consumed(SequenceKey(43, 0), whole)
    assert not consumed(SequenceKey(1, 0), TRIM_HORIZON)
    assert in_range(SequenceKey(42, 4), inside, whole) and not in_range(SequenceKey(42, 3), inside, whole)
    assert in_range(SequenceKey(42, 0), after("41"), inside)
    assert not in_range(SequenceKey(42, 4), after("41"), inside)
    ended = after("42", 3).finished()
    assert ended.encode() == "SHARD_END:42" and ended.key == SequenceKey(42, WHOLE) and not ended.inside_aggregate
    assert as_checkpoint("s", ended) == Checkpoint("s", "42", None, shard_end=True)


def test_a_batch_ends_inside_an_aggregate_only_when_part_of_it_is_left() -> None:
    start = TRIM_HORIZON
    keys = [SequenceKey(7, 0), SequenceKey(9, 0), SequenceKey(9, 1)]
    assert end_after([], SequenceKey(7, 0), start) == start
    assert end_after(keys[:2], SequenceKey(9, 1), start) == after("9", 0)
    assert end_after(keys, None, start) == after("9")
    assert end_after(keys, SequenceKey(10, 0), start) == after("9")
    assert end_after(keys[:1], SequenceKey(9, 0), start) == after("7")


def test_read_mode_is_read_whatever_its_case_and_spacing_and_defaults_to_auto() -> None:
    options = {"streamName": "s", "appName": "a"}
    assert parse_source_options(options)[1].read_mode == "auto"
    assert parse_source_options({**options, "readMode": " Executors "})[1].read_mode == "executors"
    assert parse_source_options({**options, "readmode": "DRIVER"})[1].read_mode == "driver"
    with pytest.raises(ConfigError, match=r"^option 'readMode' must be one of auto, driver, executors, got 'both'$"):
        parse_source_options({**options, "readMode": "both"})


def test_a_shard_end_with_its_last_record_reads_back_as_that_end() -> None:
    ended = after("42").finished()
    assert Position.parse("SHARD_END:42") == ended == shard_end(SequenceKey(42, WHOLE))
    assert Position.parse(ended.encode()) == ended
    with pytest.raises(CheckpointError, match=r"^offset: unreadable shard position 'LATEST:42'"):
        Position.parse("LATEST:42")


def test_an_ended_position_checkpoints_the_whole_record_whatever_sub_sequence_it_carries() -> None:
    ended_inside = shard_end(SequenceKey(42, 3))
    assert ended_inside.key == SequenceKey(42, WHOLE)
    assert as_checkpoint("s", ended_inside) == Checkpoint("s", "42", None, shard_end=True)


def test_a_batch_ending_inside_an_aggregate_holds_the_user_record_it_ends_at() -> None:
    inside = after("42", 3)
    assert in_range(SequenceKey(42, 3), after("41"), inside)
    assert in_range(SequenceKey(42, 3), after("42", 2), inside)
    assert not in_range(SequenceKey(42, 3), inside, after("42", 5))  # consumed by the batch before
    assert in_range(SequenceKey(43, 0), after("42"), after("43", 0))


def test_the_idle_backoff_options_pace_both_read_modes_and_are_not_reported_as_unused() -> None:
    options = {"streamName": "s", "appName": "a", "emptyRecordBackoffS": "0.5", "maxEmptyRecordBackoffS": "4"}
    config, _ = parse_source_options(options)
    assert config.reading.max_empty_record_backoff_s == 4.0
    assert unused_options(options) == []
