"""Runs mutmut (configured in pyproject.toml, ``[tool.mutmut]``) with a test list per mutated module.

mutmut's stats run records which tests call each mutated function, and each mutant is then tested against those
tests only. That is too many for this project: every function the spout calls is covered by most of the
integration suite, and each mutant runs in a fresh process that starts its own servers. This driver narrows the
recorded tests, per module, to the ones written for that module (``TESTS_BY_MODULE``), keeps one Kinesis backend of
each test parametrized over moto and kinesalite (kinesalite: real sequence numbers), and runs a mutant of an I/O
module against its module's fastest test that reaches it (first pass) or against the tests written for the
module's mutants and its fastest tests up to a time budget (``BUDGET_S``, second pass, survivors only). Narrowing
can only let a mutant survive that more tests would kill: the score is a lower bound. A function that none of the
recorded tests reaches is reported as "no tests".

Usage: ``python scripts/mutation_run.py [--second-pass] [--retest-survivors] [--restat GLOB]... [mutmut run options
and mutant names]``.
``--second-pass`` tests the survivors of the first pass again (once each; run it with a larger budget),
``--retest-survivors`` tests every surviving and untested mutant again (after tests were added),
``MUTATION_ONLY=PREFIX`` (e.g. ``kinesis_spout/tracking/``) mutates only the modules of ``only_mutate`` whose path
starts with it; when the unit tests alone test all of them, mutmut records the calls of ``tests/unit`` only (no server
starts), or of the modules' own test files when each names its own (``own_test_files``), and no test has a wall-clock
limit (a loop meets mutmut's own): a partial round in minutes on a quiet machine. Use a ``mutants/`` of its own for
it (move the full round's aside).
``--restat GLOB`` (repeatable) records again which functions the tests matching GLOB (fnmatch on node ids) call:
mutmut records that once per test, so a test that reaches a function added or moved since keeps its old record
(the function's mutants then have "no tests") until it is recorded again: pass it for a test file edited since
its tests were first recorded. ``MUTATION_DEBUG=1`` shows pytest's output (e.g. which test failed mutmut's stats run).
``MUTATION_TIMEOUT_MULTIPLIER=N`` (mutmut's default 15) sets mutmut's limit per mutant, (measured test time +
``timeout_constant``) x N seconds of wall clock (twice that of CPU): on a machine so loaded that a worker at nice 19
waits minutes for a CPU, the default counts slow survivors as timeouts; a change tests the timeouts again only.
Run from the project root, in the mutation venv (``make mutation`` does both).

mutmut copies the package into ``mutants/`` once and rewrites only the mutated modules when they change (it copies
the tests on every run): the driver first refreshes the copies of the other modules that changed since, so the
mutants never run against a stale ``config.py`` or a missing module, and copies the folders the tests import besides
the package (``ALSO_COPY``: the benchmark helpers, the scripts and the examples some unit tests test).
"""

from __future__ import annotations

import filecmp
import fnmatch
import json
import os
import shutil
import sys
from pathlib import Path

UNIT = ["tests/unit/*"]
INTEGRATION = "tests/integration/"

#: Which tests may kill the mutants of a module (fnmatch patterns on pytest node ids); a package's entry stands for
#: its modules that have none of their own (``patterns_for``). Pure modules: the unit tests, all of those that reach
#: the mutated function (they start no server; the module's own are in the folder of its layer: tests/unit/core for
#: positions, records, the tracker and tracking/, retry and config/; tests/unit/checkpoint, coordination, kinesis,
#: spark and spout for the others). I/O modules: the integration test files of the module's behaviour (those written
#: against its surviving mutants among them, ``WRITTEN_FOR_MUTANTS``).
TESTS_BY_MODULE: dict[str, list[str]] = {
    "kinesis_spout.positions": UNIT,  # tests/unit/core/test_positions.py
    "kinesis_spout.records": UNIT,  # tests/unit/core/test_records.py
    "kinesis_spout.tracker": UNIT,  # the tracker's names: tests/unit/core/test_public_names.py
    # the tracker (span, span_list, span_failures, spans, retries, keys): its own tests, those of the spans, the
    # per-record cases, the model and the differential test, and of the public name (a mutant of a function every
    # spout test reaches ran against some 300 unit tests otherwise)
    "kinesis_spout.tracking": [f"tests/unit/core/{name}::*" for name in (
        "test_span*.py", "test_tracker_checkpoints.py", "test_tracker_retries.py", "test_tracker_model.py",
        "test_public_names.py")],
    # the retry policy (RetryBackoff among it): its own tests, the tracker's delays and the pipeline's batch retries
    # (every unit test that builds a configuration reaches the policy's checks: some 600 tests a mutant otherwise)
    "kinesis_spout.retry": [f"tests/unit/{name}::*" for name in (
        "core/test_retry.py", "core/test_retry_stop_and_wait.py", "core/test_tracker_retries.py",
        "spark/test_batch_retry.py")],
    "kinesis_spout.config": UNIT,  # its modules: tests/unit/core/test_config*.py
    "kinesis_spout.spout.shards": UNIT,  # a shard's lifecycle: tests/unit/spout/test_shard_lifecycle.py
    "kinesis_spout.checkpoint.base": UNIT,
    "kinesis_spout.checkpoint.memory": UNIT,
    "kinesis_spout.coordination.lineage": UNIT,
    "kinesis_spout.coordination.assignment": UNIT,
    "kinesis_spout.kinesis.aggregation": UNIT,
    "kinesis_spout.spark.source.executor_batches": UNIT + [INTEGRATION + "spark/test_executor_reads.py::*"],
    "kinesis_spout.spark.source.offsets": UNIT + [INTEGRATION + "spark/test_spark_source.py::*"],
    "kinesis_spout.checkpoint.writer": [INTEGRATION + f + "::*" for f in (
        "checkpoint/test_checkpoint_writer.py", "zookeeper/test_zookeeper_trouble.py")],
    "kinesis_spout.checkpoint.zookeeper": [INTEGRATION + f + "::*" for f in (
        "zookeeper/test_zookeeper_store.py", "zookeeper/test_zookeeper_trouble.py",
        "checkpoint/test_checkpoint_writer.py")],
    "kinesis_spout.zookeeper.session": [INTEGRATION + f + "::*" for f in (  # the ownership tests read its session id
        "zookeeper/test_zookeeper_session.py", "zookeeper/test_zookeeper_store.py",
        "zookeeper/test_zookeeper_trouble.py", "zookeeper/test_zookeeper_ownership.py")],
    # the one place getters are made: its own unit tests (which getter the settings choose, each setting reaching it)
    "kinesis_spout.kinesis.retrieval.factory": ["tests/unit/kinesis/test_retrieval_factory.py::*"],
    # the one rule for retriable read errors: its own tests (the readers' integration tests run it too)
    "kinesis_spout.kinesis.retrieval.read_retries": ["tests/unit/kinesis/test_read_retries.py::*"],
    # the records of a reply (KPL de-aggregation, foreign user records), shared by both getters
    "kinesis_spout.kinesis.retrieval.conversion": ["tests/unit/kinesis/test_retrieval_factory.py::*",
                                                   INTEGRATION + "kinesis/test_getter.py::*"],
    "kinesis_spout.kinesis.retrieval.polling": [INTEGRATION + f + "::*" for f in (
        "kinesis/test_reader_backoff.py", "kinesis/test_faults.py", "kinesis/test_getter.py")],
    "kinesis_spout.kinesis.retrieval.reader": [INTEGRATION + f + "::*" for f in (
        "kinesis/test_reader_backoff.py", "kinesis/test_faults.py", "kinesis/test_reader.py")],
    # the columnar decoding (its differential test against the record path) and the readers' buffer of columns
    "kinesis_spout.kinesis.retrieval.wire_columns": [f"tests/unit/{name}::*" for name in (
        "kinesis/test_wire_columns.py", "kinesis/test_column_ranks.py", "kinesis/test_tip_columns.py",
        "kinesis/test_chunks.py", "kinesis/test_aggregation_columns.py", "spark/test_column_rows.py")],
    "kinesis_spout.kinesis.retrieval.chunks": ["tests/unit/kinesis/test_chunks.py::*"],
    "kinesis_spout.spout": [INTEGRATION + f + "::*" for f in (  # its modules but shards
        "spout/test_spout.py", "spout/test_spout_loss_paths.py", "spout/test_next_tuple.py",
        "spout/test_spout_lifecycle.py", "coordination/test_leases.py")] + [
        INTEGRATION + "spout/test_metrics.py::" + name + "*" for name in (  # not the endpoint's own tests
            "test_metrics_count_what_happened_to_each_record_and_the_age_of_the_stored_checkpoint",
            "test_after_a_restart_inside_an_aggregate_the_metrics_show_the_stored_user_record",
            "test_metrics_port_serves_the_spout_s_metrics_until_close",
            "test_metrics_of_a_closed_shard_count_corrupt_aggregates_retried_errors_expired_iterators_and_pending_letters")],
}

#: Test files outside mutmut's test selection (``pytest_add_cli_args_test_selection`` in pyproject.toml) whose calls
#: this driver records itself at the start of every run, so that the modules listing them above can use them.
#: (mutmut drops tests outside its selection from its records at every start; a change of the selection itself
#: would make it test every mutant again.) The lease tests: nothing else reaches the spout's lease code; the
#: ownership tests: nothing else reaches the session's ``delete_once`` and the session-id bookkeeping they rely on.
EXTRA_TESTS = ["tests/integration/coordination/test_leases.py",
               "tests/integration/zookeeper/test_zookeeper_ownership.py"]

#: The tests written against the surviving mutants of a module, by function name (each lives in the test file of the
#: behaviour it pins, named in the comments). They count as the module's own tests only (``narrow``: another
#: module's file patterns may cover them), and with a budget a mutant runs against every one of them it reaches.
WRITTEN_FOR_MUTANTS: dict[str, frozenset[str]] = {
    "kinesis_spout.kinesis.retrieval.polling": frozenset({
        # in kinesis/test_getter.py
        "test_start_positions_refused_and_accepted",
        "test_a_new_getter_reads_10000_records_a_call_and_has_not_ended",
        "test_latest_is_pinned_to_the_time_its_iterator_was_taken_less_the_margin",
        "test_at_timestamp_reads_from_the_first_record_that_arrived_then",
        "test_a_closed_shard_ends_and_stays_ended",
        "test_each_expired_iterator_is_counted_and_a_second_in_a_row_is_an_error_naming_the_shard",
        "test_an_iterator_refused_is_an_error_naming_the_shard_and_the_position",
        "test_prepare_takes_one_iterator_however_often_it_is_called",
        "test_a_getter_that_deaggregates_hands_out_each_user_record_and_keeps_a_corrupt_aggregate_whole",
        "test_a_paced_getter_waits_its_interval_between_calls",
        "test_a_connection_lost_while_reading_is_a_retriable_error_naming_the_shard_and_nothing_is_skipped",
    }),
    "kinesis_spout.kinesis.retrieval.reader": frozenset({
        # in kinesis/test_reader.py
        "test_taking_one_record_at_a_time_hands_out_every_record_in_order_under_a_byte_budget_of_three_records",
        "test_a_new_reader_has_not_ended_and_has_the_documented_defaults",
        "test_the_get_records_backoff_doubles_its_ceiling_up_to_the_maximum_with_full_jitter",
        "test_take_frees_the_byte_budget_so_prefetching_goes_on",
        "test_poll_makes_one_call_buffers_and_counts_its_records_and_asks_for_the_next_call_soon",
        "test_an_idle_shard_is_polled_ever_less_often_up_to_its_maximum_and_soon_again_once_records_come",
        "test_a_full_buffer_parks_the_reader_without_a_call_until_records_are_taken",
        "test_a_throttle_is_retried_after_a_backoff_and_the_reader_gives_up_after_max_retries_keeping_what_it_read",
        "test_a_reader_on_a_pool_of_its_own_runs_one_named_thread_that_close_ends_and_then_makes_no_call",
        "test_round_robin_takes_one_record_per_shard_in_turn_skipping_empty_and_full_shards",
        "test_removing_a_shard_starts_the_turn_over_and_a_failed_shard_s_error_is_raised",
        "test_wait_returns_at_once_for_a_signal_given_before_it_and_otherwise_waits_its_timeout",
        "test_readers_share_the_round_robin_s_pool_of_threads_which_close_ends",
        "test_a_closed_shard_s_reader_ends_after_its_last_record_and_says_so",
        "test_a_one_record_buffer_is_parked_when_full_and_woken_by_each_take",
        "test_take_upto_takes_oldest_first_within_a_count_and_a_byte_budget_and_always_one_record",
        "test_next_records_takes_a_chunk_of_one_shard_in_turn_within_the_room_each_shard_has",
        "test_an_unexpected_exception_of_a_poll_is_kept_and_raised_by_take_as_an_error_naming_the_shard",
    }),
    "kinesis_spout.checkpoint.writer": frozenset({
        # in checkpoint/test_checkpoint_writer.py
        "test_the_deadline_is_reached_at_the_first_failure_past_it_with_the_write_error_as_cause",
        "test_no_error_before_the_deadline",
        "test_a_lost_connection_past_the_deadline_is_an_error_without_a_cause_that_clears_when_it_is_back",
        "test_close_with_the_store_down_gives_up_and_ends_the_writer_s_thread",
        "test_after_a_lost_session_the_writer_reports_exactly_the_shards_another_owner_moved_past_it",
        "test_the_writer_runs_on_one_named_daemon_thread_that_close_ends",
        "test_a_shard_is_written_at_once_then_once_per_interval_with_its_newest_value_and_flush_writes_it_now",
        "test_a_value_offered_within_the_interval_is_written_when_the_interval_is_up_without_a_flush",
        "test_flush_waits_for_the_write_under_way_until_its_timeout_and_close_does_not_hang_on_a_stuck_store",
        "test_close_writes_the_pending_value_of_a_shard_not_due_yet_even_when_its_flush_has_no_time_left",
        "test_a_write_failing_after_earlier_successes_is_retried_too",
        "test_a_failing_store_is_retried_with_a_growing_pause_not_in_a_tight_loop",
        "test_concurrent_flushes_leave_the_interval_in_force_afterwards",
        "test_a_conflict_is_reported_to_the_handler_and_its_value_dropped_not_retried",
        "test_failed_writes_of_two_shards_are_both_kept_and_retried",
        "test_the_deadline_counts_from_when_the_connection_was_first_seen_down",
        "test_a_refused_write_is_an_error_at_once_its_value_stays_pending_and_the_error_clears_once_written",
        "test_a_look_that_found_nothing_new_leaves_the_writer_writing_what_comes_next",
    }),
    "kinesis_spout.checkpoint.zookeeper": frozenset({
        # in zookeeper/test_zookeeper_store.py
        "test_list_returns_every_stored_checkpoint",
        "test_errors_while_zookeeper_is_down_say_what_was_waited_for",
        "test_a_bad_batch_id_is_an_error_naming_the_node_and_quoting_at_most_40_characters",
        "test_a_lost_session_is_reported_once",
        "test_waiting_for_the_connection_is_bounded",
        "test_settings_taken_from_the_configuration",
        "test_security_gives_kazoo_the_auth_acl_and_tls_files",
        "test_a_new_store_has_the_documented_defaults_and_no_lost_session",
        "test_a_server_that_is_not_there_is_a_clear_retriable_error",
        "test_a_fenced_write_needs_the_lease_at_its_epoch_and_unfence_releases_or_revokes",
        "test_a_fenced_write_never_overwrites_a_higher_checkpoint_written_after_its_read",
        "test_batch_ends_are_recorded_once_listed_per_batch_and_deleted_below_a_batch",
        "test_a_query_heartbeat_is_zookeeper_s_modification_time_in_seconds_and_the_node_version",
        "test_a_query_s_batch_ends_are_deleted_only_at_the_version_they_were_judged_at",
        "test_a_suspended_connection_is_no_lost_session_listeners_hear_each_state_and_close_is_silent",
        "test_a_server_that_stops_answering_is_a_retriable_error_within_the_operation_timeout",
        "test_the_errors_of_executor_read_bookkeeping_say_what_was_attempted",
        # in zookeeper/test_zookeeper_trouble.py
        "test_batch_ends_cut_mid_pipeline_reads_the_lost_ones_again_and_skips_one_deleted_while_away",
        "test_batch_ends_skip_a_shard_deleted_between_the_listing_and_the_reads",
        "test_query_heartbeats_cut_mid_pipeline_are_read_again",
        "test_delete_query_lists_again_what_a_cut_lost_and_skips_a_batch_deleted_while_away",
        "test_delete_query_skips_a_batch_deleted_between_the_listings",
        "test_delete_query_counts_its_root_deleted_meanwhile_as_done",
        "test_delete_batches_goes_on_past_a_batch_deleted_meanwhile",
        "test_a_batch_end_deleted_between_its_create_and_its_read_is_a_clear_error",
        "test_a_heartbeat_whose_node_another_query_created_meanwhile_is_written_over_it",
        "test_a_heartbeat_that_keeps_racing_gives_up_with_a_retriable_error_naming_the_node",
        "test_an_error_the_server_answers_with_is_a_retriable_error_that_names_it",
        "test_a_time_out_the_server_answers_with_is_tried_again_as_many_times_as_configured",
        "test_an_error_at_each_later_step_of_a_call_says_which_step_failed",
        "test_the_batch_id_s_and_a_conflict_s_errors_name_what_they_are_about",
    }),
    "kinesis_spout.spout": frozenset({
        # in spout/test_next_tuple.py, test_spout_lifecycle.py, test_metrics.py
        "test_next_tuple_emits_a_failed_record_again_and_the_checkpoint_waits_for_it",
        "test_an_empty_closed_shard_is_finished_once_with_no_sequence_number_and_its_children_are_read",
        "test_failed_and_timed_out_records_reach_the_dead_letter_handler_with_their_reason_and_unknown_ids_are_counted",
        "test_a_retry_waits_its_backoff_and_comes_back_with_the_scheme_s_values",
        "test_a_spout_refuses_calls_before_open_and_after_close_and_open_and_close_are_idempotent",
        "test_a_spout_left_open_warns_when_it_is_finalized_and_a_closed_or_half_made_one_does_not",
        "test_metrics_count_what_happened_to_each_record_and_the_age_of_the_stored_checkpoint",
        "test_a_checkpoint_inside_an_aggregate_names_its_user_record_until_the_aggregate_is_done",
        "test_after_a_restart_inside_an_aggregate_the_metrics_show_the_stored_user_record",
        "test_a_dead_letter_envelope_carries_the_reason_attempts_stream_app_and_time",
        "test_a_dead_letter_handler_that_keeps_failing_is_an_error_of_next_tuple_until_it_works_again",
        "test_a_store_that_keeps_failing_is_an_error_of_next_tuple_until_a_write_succeeds",
        "test_a_checkpoint_behind_the_stored_one_is_a_conflict_passed_to_the_user_s_handler",
        "test_next_batch_takes_at_most_max_records_500_by_default_and_stops_once_its_bytes_reach_max_bytes",
        "test_in_flight_limits_of_records_and_of_bytes_hold_back_new_records_until_acks",
        "test_a_retry_comes_back_as_soon_as_its_backoff_is_up_not_at_the_end_of_the_batch_wait",
        "test_a_zero_backoff_emits_a_failed_record_again_at_once",
        "test_the_shards_readers_share_reader_threads_threads_and_make_calls_of_max_records_per_call",
        "test_an_idle_shard_is_polled_less_often_up_to_max_empty_record_backoff",
        "test_latest_starts_at_the_tip_when_open_returns_and_deaggregate_false_delivers_aggregates_whole",
        "test_latest_is_the_tip_when_open_returns_also_when_the_iterator_is_slow_to_come",
        "test_a_latest_iterator_throttled_at_open_is_taken_by_the_reader_when_it_can",
        "test_opening_an_open_spout_changes_nothing",
        "test_the_spout_reads_through_the_client_it_was_given_and_in_the_configured_region",
        "test_children_of_a_shard_split_while_the_spout_runs_are_read_after_it",
        "test_close_ends_every_thread_the_spout_started_and_releases_the_store_only_if_it_was_opened",
        "test_metrics_port_serves_the_spout_s_metrics_until_close",
        "test_ack_many_acks_every_known_id_around_unknown_ones_and_counts_those",
        "test_due_retries_are_taken_from_the_shards_in_turn",
        "test_a_retry_the_scheme_refuses_is_a_poison_record_dead_lettered_with_the_scheme_s_error",
        "test_unreliable_mode_acks_on_emit_and_moves_the_checkpoint_without_acks",
        "test_a_stream_deleted_while_the_spout_reads_it_is_an_error_of_the_next_call",
        "test_batch_limits_hold_across_the_chunks_of_several_shards_and_for_due_retries",
        "test_an_error_met_after_tuples_were_taken_comes_after_them_from_the_next_call",
        "test_metrics_of_a_closed_shard_count_corrupt_aggregates_retried_errors_expired_iterators_and_pending_letters",
        # in spout/test_spout.py
        "test_a_shard_listed_after_a_finished_one_is_read_at_open_and_the_finished_one_is_looked_up_once",
        # in coordination/test_leases.py
        "test_leases_with_a_store_other_than_zookeeper_s_is_an_error_naming_it_and_the_fix",
        "test_a_static_spout_beside_lease_workers_names_them_all_and_alone_has_no_lease_epochs",
        "test_while_zookeeper_is_down_nothing_is_emitted_no_shard_is_dropped_and_close_leaves_the_leases_alone",
        "test_a_shard_whose_lease_moved_on_is_dropped_with_its_buffer_and_taken_again_once_free",
        "test_a_worker_whose_registration_vanished_drops_its_shards_and_takes_them_again_under_a_new_epoch",
        "test_a_lease_handed_over_waits_for_its_records_in_flight_and_the_next_owner_reads_none_of_them_again",
        "test_a_lease_handed_over_with_records_never_acked_goes_after_message_timeout_and_they_are_read_again",
        "test_a_lease_lost_during_its_hand_over_has_its_last_checkpoint_refused_and_reported_and_nothing_is_lost",
    }),
}



#: Measured test time (seconds, fastest tests first) run against one mutant of an I/O module, beyond the tests
#: written for its mutants. Each test of an I/O module needs servers, and every mutant runs in a process of its own.
#: 0 (the first pass): only the module's fastest test that reaches the mutated function. $MUTATION_BUDGET_S sets it.
BUDGET_S = float(os.environ.get("MUTATION_BUDGET_S", "0"))


def listed_as(module: str) -> str | None:
    """The entry of ``TESTS_BY_MODULE`` that stands for ``module``: its own, else that of its closest package listed
    (``kinesis_spout.config`` for ``kinesis_spout.config.groups``), else None (no narrowing)."""
    parts = module.split(".")
    while parts:
        if ".".join(parts) in TESTS_BY_MODULE:
            return ".".join(parts)
        parts.pop()
    return None


def unit_tested(module: str) -> bool:
    """Whether only unit tests (no server) are listed for ``module``."""
    patterns = patterns_for(module)
    return bool(patterns) and all(p.startswith("tests/unit/") for p in patterns or ())


def own_test_files(mutated: frozenset[str]) -> list[str]:
    """The test files that the patterns of the modules ``mutated`` (paths) name, when every one of those patterns
    names files (``tests/unit/core/test_spans*.py::*``), else []. A partial round records only their calls: ``narrow``
    would keep no other test for a function they reach, and the rest of the unit tests takes most of the stats run
    (mutmut traces every call of every test)."""
    files: set[str] = set()
    for path in mutated:
        for pattern in patterns_for(path.removesuffix(".py").replace("/", ".")) or ["*"]:
            glob = pattern.split("::")[0]
            if "::" not in pattern or "/" not in glob.rstrip("*") or glob.endswith("/*"):
                return []
            files |= {p.as_posix() for p in Path().glob(glob)}
    return sorted(files)


def patterns_for(module: str) -> list[str] | None:
    """The patterns of ``TESTS_BY_MODULE`` for ``module`` (see ``listed_as``), None when it has none."""
    listed = listed_as(module)
    return None if listed is None else TESTS_BY_MODULE[listed]


def test_name(node_id: str) -> str:
    """The test function's name in a pytest node id (without its parameters)."""
    return node_id.split("::")[-1].split("[")[0]


def narrow(tests: set[str], module: str, duration: dict[str, float]) -> set[str]:
    """The tests of ``tests`` that run against the mutants of ``module``: the module's own, else (a function only
    reached through another module) any; one backend of a test run on both. The module's own unit tests: all of
    them. Of the others, with no budget the fastest one; with a budget every test written for the module's mutants
    and the fastest up to ``BUDGET_S``. mutmut runs them fastest first and stops at the first failure."""
    patterns = patterns_for(module)
    if patterns is None:
        return tests
    listed = listed_as(module)
    others = {name for key, names in WRITTEN_FOR_MUTANTS.items() if key != listed for name in names}
    own = {t for t in tests if any(fnmatch.fnmatchcase(t, p) for p in patterns) and test_name(t) not in others}
    kept = own or set(tests)
    # a test run on both backends: keep the kinesalite run (real sequence numbers), drop the moto one
    kept = {t for t in kept if "[moto_kinesis" not in t or t.replace("[moto_kinesis", "[kinesalite", 1) not in kept}
    unit = {t for t in kept if t.startswith("tests/unit/")} if own else set()  # no servers: all of them
    if unit and all(p.startswith("tests/unit/") for p in patterns):
        return unit
    fastest = sorted(kept - unit, key=lambda t: (duration.get(t, 0.0), t))
    if BUDGET_S <= 0:
        return unit | set(fastest[:1])
    written = {name for names in WRITTEN_FOR_MUTANTS.values() for name in names}
    chosen = unit | {t for t in kept if test_name(t) in written}
    spent = 0.0
    for t in fastest:
        if t in chosen:
            continue
        if chosen and spent + duration.get(t, 0.0) > BUDGET_S:
            break
        chosen.add(t)
        spent += duration.get(t, 0.0)
    return chosen


SECOND_PASS = Path("mutants") / "second-pass.json"

#: Folders besides the package and the tests that tests import (mutmut copies neither into mutants/): the benchmark
#: helpers, and scripts/docs_reference.py and the pages it renders (the reference pages' test).
ALSO_COPY = ["benchmarks", "scripts", "docs", "examples"]


def reset_survivors(skip: set[str] = frozenset()) -> int:  # type: ignore[assignment]
    """Mark the surviving and untested mutants of the last run (but those in ``skip``) as not checked, so that
    mutmut tests them again."""
    count = 0
    for meta_path in Path("mutants").rglob("*.py.meta"):
        meta = json.loads(meta_path.read_text())
        codes = meta["exit_code_by_key"]
        again = [k for k, code in codes.items() if code in (0, 5, 33) and k not in skip]
        for key in again:
            codes[key] = None
        if again:
            meta_path.write_text(json.dumps(meta, indent=4))
            count += len(again)
    return count


def unit_only(keys: set[str]) -> set[str]:
    """The mutants of ``keys`` that the second pass would test against the same tests as the first: those of a
    module tested by the unit tests only (``UNIT``) whose function some unit test reaches (``narrow`` then keeps
    all of them, whatever the budget)."""
    from mutmut.utils.format_utils import get_module_from_key, mangled_name_from_mutant_name

    path = Path("mutants") / "mutmut-stats.json"
    recorded = json.loads(path.read_text())["tests_by_mangled_function_name"] if path.exists() else {}
    return {key for key in keys if unit_tested(get_module_from_key(key)) and any(
        t.startswith("tests/unit/") for t in recorded.get(mangled_name_from_mutant_name(key), ()))}


def survivors() -> set[str]:
    return {key for meta_path in Path("mutants").rglob("*.py.meta")
            for key, code in json.loads(meta_path.read_text())["exit_code_by_key"].items() if code in (0, 5, 33)}


def refresh_copies(package: Path = Path("kinesis_spout"), mutated: frozenset[str] = frozenset()) -> int:
    """Copy the package's files that are not mutated into ``mutants/`` where the copy is missing or differs (mutmut
    copies them only once); returns how many were copied."""
    count = 0
    for source in package.rglob("*"):
        if not source.is_file() or "__pycache__" in source.parts or source.as_posix() in mutated:
            continue
        copy = Path("mutants") / source
        if copy.exists() and filecmp.cmp(source, copy, shallow=False):
            continue
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy)
        count += 1
    return count


def forget_tests(patterns: list[str]) -> int:
    """Drop the tests matching ``patterns`` from mutmut's records (``mutants/mutmut-stats.json``), so that its next
    run records again which functions they call; returns how many were dropped."""
    path = Path("mutants") / "mutmut-stats.json"
    if not patterns or not path.exists():
        return 0
    stats = json.loads(path.read_text())
    durations: dict[str, float] = stats["duration_by_test"]
    dropped = {t for t in durations if any(fnmatch.fnmatchcase(t, p) for p in patterns)}
    for t in dropped:
        del durations[t]
    stats["tests_by_mangled_function_name"] = {
        f: [t for t in tests if t not in dropped] for f, tests in stats["tests_by_mangled_function_name"].items()}
    path.write_text(json.dumps(stats, indent=4))
    return len(dropped)


def main() -> None:
    import mutmut.__main__ as mutmut_main
    from mutmut.configuration import config
    from mutmut.state import state
    from mutmut.utils.format_utils import get_module_from_key

    args = sys.argv[1:]
    restat = []
    while "--restat" in args:
        at = args.index("--restat")
        restat.append(args[at + 1])
        del args[at:at + 2]
    import tomllib

    mutated = frozenset(tomllib.loads(Path("pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"])
    only = os.environ.get("MUTATION_ONLY")
    unit_only_run = False
    if only:  # a partial round: fewer modules mutated, and no server when the unit tests test all of them
        mutated = frozenset(path for path in mutated if path.startswith(only))
        if not mutated:
            sys.exit(f"MUTATION_ONLY={only!r} matches none of [tool.mutmut] only_mutate in pyproject.toml: give the "
                     "start of one of their paths, e.g. kinesis_spout/tracking/")
        config().only_mutate = sorted(mutated)
        unit_only_run = all(unit_tested(path.removesuffix(".py").replace("/", ".")) for path in mutated)
        if unit_only_run:
            # the modules' own test files when each lists files of its own, else the unit tests of the library
            # (tests/unit/tooling tests the project's scripts and pages)
            config().pytest_add_cli_args_test_selection = own_test_files(mutated) or [
                "tests/unit", "--ignore=tests/unit/tooling"]
            # no per-test wall-clock limit: a pure test waits on nothing, and on a loaded machine a worker at the
            # lowest priority can wait longer than it for a CPU, which would count its mutant killed; a mutant that
            # loops meets mutmut's own limits instead (a timeout)
            config().pytest_add_cli_args = [arg for arg in config().pytest_add_cli_args
                                            if not arg.startswith("--timeout")]
        print(f"MUTATION_ONLY={only}: mutating {len(mutated)} modules"
              + (", recording the unit tests' calls only" if unit_only_run else ""))
    copied = refresh_copies(mutated=mutated) + sum(refresh_copies(Path(folder)) for folder in ALSO_COPY)
    print(f"refreshed {copied} stale copies of files not mutated in mutants/")
    if restat:
        print(f"recording again the functions called by {forget_tests(restat)} tests ({', '.join(restat)})")
    second_pass = "--second-pass" in args
    if second_pass:  # survivors of the first pass, not yet tested again without the budget
        args.remove("--second-pass")
        done = set(json.loads(SECOND_PASS.read_text())) if SECOND_PASS.exists() else set()
        done |= unit_only(survivors())  # the budget changes nothing for them: not tested again
        print(f"second pass: testing {reset_survivors(done)} surviving or untested mutants again, "
              f"with a test budget of {BUDGET_S:g} s")
    if "--retest-survivors" in args:
        args.remove("--retest-survivors")
        print(f"testing {reset_survivors()} surviving or untested mutants again")
        # the survivors now get a first pass again: the next second pass must test all of them again too
        SECOND_PASS.unlink(missing_ok=True)

    if os.environ.get("MUTATION_TIMEOUT_MULTIPLIER"):  # a wall-clock limit to match a loaded machine's waits
        config().timeout_multiplier = float(os.environ["MUTATION_TIMEOUT_MULTIPLIER"])
    if os.environ.get("MUTATION_DEBUG"):  # pytest's output shown, e.g. to see which test failed the stats run
        config().debug = True
    collect = mutmut_main.collect_or_load_stats

    def collect_and_narrow(*a: object, **kw: object) -> None:
        collect(*a, **kw)  # type: ignore[arg-type]
        recorded = set(state().duration_by_test)
        extra = [] if unit_only_run else [
            path for path in EXTRA_TESTS if not any(t.startswith(path + "::") for t in recorded)]
        if extra:
            print(f"    recording the calls of the tests outside the selection: {', '.join(extra)}")
            mutmut_main.run_stats_collection(a[0], tests=extra)  # type: ignore[arg-type]
        by_function = state().tests_by_mangled_function_name
        before = sum(map(len, by_function.values()))
        for function, tests in by_function.items():
            by_function[function] = narrow(set(tests), get_module_from_key(function), state().duration_by_test)
        print(f"    tests per mutated function narrowed to the module's own: {before} -> "
              f"{sum(map(len, by_function.values()))} (function, test) pairs")

    mutmut_main.collect_or_load_stats = collect_and_narrow
    try:
        mutmut_main.cli(["run", *args])
    finally:
        if second_pass:
            SECOND_PASS.write_text(json.dumps(sorted(survivors()), indent=1))


if __name__ == "__main__":
    main()
