"""One owned shard's lifecycle on its own, without servers: every legal move, every illegal one refused with a
clear message, and what each phase allows (new records? retries? acks? checkpoints?)."""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.coordination.lineage import ShardStart
from kinesis_spout.errors import SpoutStateError
from kinesis_spout.kinesis.retrieval.polling import ShardGetter
from kinesis_spout.kinesis.retrieval.reader import BufferedShardReader, RoundRobinReader
from kinesis_spout.kinesis.shards import Shard
from kinesis_spout.positions import TRIM_HORIZON
from kinesis_spout.records import SequenceKey
from kinesis_spout.spout.shards import TRANSITIONS, IllegalShardTransition, ShardLifecycle, ShardPhase
from kinesis_spout.tracker import FailOutcome, InflightRecordTracker, RetryBackoff

P = ShardPhase
SHARD = "shardId-000000000007"
SEQ = 49590338271490256608559692538361571095921575989136588898  # 56 digits, as Kinesis numbers records


def key(i: int) -> SequenceKey:
    return SequenceKey(SEQ + i * 2 ** 80, 0)


MADE: list[BufferedShardReader] = []  # every reader made by a test, closed by the fixture


@pytest.fixture
def rr() -> Iterator[RoundRobinReader]:
    """A round-robin without a pool: a reader started here polls on its own thread (no client: its first call
    fails and is kept for a take that never comes). Every reader made is closed at the end (its thread joined),
    those the lifecycle took out of the round-robin too."""
    rr = RoundRobinReader(0)
    yield rr
    rr.close()
    while MADE:
        MADE.pop().close()


def lifecycle(rr: RoundRobinReader, retry_limit: int = 3) -> ShardLifecycle:
    """A new shard as the spout makes it: STARTING, its reader in the round-robin but not started."""
    getter = ShardGetter(None, "stream", SHARD, TRIM_HORIZON)
    reader = BufferedShardReader(getter, max_records=10, max_bytes=1000, empty_backoff_s=1.0, on_data=rr.notify)
    tracker = InflightRecordTracker(SHARD, retry_limit=retry_limit, message_timeout_s=None,
                                    backoff=RetryBackoff(initial_s=0.0, multiplier=1.0, max_s=0.0))
    state = ShardLifecycle(Shard(SHARD, None, None, "0", None), tracker, reader, ShardStart(TRIM_HORIZON))
    rr.add([reader])
    MADE.append(reader)
    return state


MOVES: dict[ShardPhase, Callable[[ShardLifecycle, RoundRobinReader], object]] = {
    P.READING: lambda s, rr: s.start_reading(),
    P.DRAINING: lambda s, rr: s.drain(rr),
    P.FINISHED: lambda s, rr: s.finish(rr),
    P.HANDED_BACK: lambda s, rr: s.hand_back(),
    P.DROPPED: lambda s, rr: s.drop(rr),
}
#: the shortest way to each phase from STARTING
PATHS: dict[ShardPhase, list[ShardPhase]] = {
    P.STARTING: [], P.READING: [P.READING], P.DRAINING: [P.READING, P.DRAINING], P.FINISHED: [P.READING, P.FINISHED],
    P.HANDED_BACK: [P.READING, P.DRAINING, P.HANDED_BACK], P.DROPPED: [P.DROPPED],
}
LEGAL = sorted(((a, b) for a, targets in TRANSITIONS.items() for b in targets), key=lambda t: (t[0].name, t[1].name))
ILLEGAL = sorted(((a, b) for a in P for b in MOVES if b not in TRANSITIONS[a]), key=lambda t: (t[0].name, t[1].name))


def at(phase: ShardPhase, rr: RoundRobinReader, **kwargs: int) -> ShardLifecycle:
    state = lifecycle(rr, **kwargs)
    for step in PATHS[phase]:
        MOVES[step](state, rr)
    assert state.phase is phase
    return state


def test_the_table_has_exactly_the_moves_the_spout_makes() -> None:
    assert {a: {b.name for b in targets} for a, targets in TRANSITIONS.items()} == {
        P.STARTING: {"READING", "DROPPED"},
        P.READING: {"DRAINING", "FINISHED", "DROPPED"},
        P.DRAINING: {"HANDED_BACK", "FINISHED", "DROPPED"},
        P.FINISHED: {"HANDED_BACK", "DROPPED"},
        P.HANDED_BACK: set(),
        P.DROPPED: set(),
    }


@pytest.mark.parametrize("source, target", LEGAL, ids=[f"{a.name}->{b.name}" for a, b in LEGAL])
def test_every_legal_move_is_made(rr: RoundRobinReader, source: ShardPhase, target: ShardPhase) -> None:
    state = at(source, rr)
    MOVES[target](state, rr)
    assert state.phase is target
    if target in (P.DRAINING, P.FINISHED, P.DROPPED, P.HANDED_BACK):  # it takes no new records any more
        assert state.reader not in rr.readers


@pytest.mark.parametrize("source, target", ILLEGAL, ids=[f"{a.name}->{b.name}" for a, b in ILLEGAL])
def test_every_illegal_move_is_refused_with_a_message_naming_both_phases_and_the_way_out(
        rr: RoundRobinReader, source: ShardPhase, target: ShardPhase) -> None:
    state = at(source, rr)
    with pytest.raises(IllegalShardTransition) as raised:
        MOVES[target](state, rr)
    assert state.phase is source  # nothing moved
    message = str(raised.value)
    assert f"{SHARD} cannot go from {source.name} to {target.name}" in message
    allowed = sorted(p.name for p in TRANSITIONS[source])
    assert (", ".join(allowed) if allowed else "nowhere: it is over") in message
    assert isinstance(raised.value, SpoutStateError)


def test_a_finished_shard_never_reads_again(rr: RoundRobinReader) -> None:
    state = at(P.FINISHED, rr)
    with pytest.raises(IllegalShardTransition, match="cannot go from FINISHED to READING"):
        state.start_reading()
    assert state.finished and not state.takes_new_records


def test_a_hand_back_must_drain_first(rr: RoundRobinReader) -> None:
    state = at(P.READING, rr)
    state.tracker.emit(key(1), 0.0)
    with pytest.raises(IllegalShardTransition, match="cannot go from READING to HANDED_BACK"):
        state.hand_back()
    assert state.phase is P.READING and state.tracker.inflight_count == 1


#: phase -> (takes new records, emits retries, counts acks, offers its moving checkpoint)
ALLOWS = {
    P.STARTING: (False, False, False, False),
    P.READING: (True, True, True, True),
    P.DRAINING: (False, True, True, True),
    P.FINISHED: (False, False, True, False),
    P.HANDED_BACK: (False, False, False, False),
    P.DROPPED: (False, False, False, False),
}


@pytest.mark.parametrize("phase", list(P), ids=[p.name for p in P])
def test_what_each_phase_allows(rr: RoundRobinReader, phase: ShardPhase) -> None:
    state = at(phase, rr)
    assert (state.takes_new_records, state.emits_retries, state.counts_acks, state.moves_checkpoint) == ALLOWS[phase]


def emitted(rr: RoundRobinReader, n: int) -> ShardLifecycle:
    """A READING shard with records 1..n in flight."""
    state = at(P.READING, rr)
    for i in range(1, n + 1):
        assert state.tracker.emit(key(i), 0.0)
    return state


def test_acks_move_the_checkpoint_while_reading_and_draining(rr: RoundRobinReader) -> None:
    state = emitted(rr, 3)
    assert state.ack(key(1).rank) and state.tracker.checkpoint == key(1)
    assert state.checkpoint_to_write() == Checkpoint(SHARD, str(key(1).sequence), None)
    assert state.checkpoint_to_write() is None  # nothing new since
    state.drain(rr)
    assert state.ack_many([key(2).rank]) and state.tracker.checkpoint == key(2)
    assert state.checkpoint_unoffered()
    assert state.checkpoint_to_write() == Checkpoint(SHARD, str(key(2).sequence), None)


def test_an_ack_after_the_hand_back_moves_no_checkpoint(rr: RoundRobinReader) -> None:
    state = emitted(rr, 2)
    state.drain(rr)
    assert state.ack(key(1).rank)
    state.hand_back()  # record 2 still in flight: its next owner reads it again
    assert not state.ack(key(2).rank)
    assert not state.ack_many([key(2).rank])
    assert state.fail(key(2).rank, 0.0) is None
    assert not state.dead_letter_written(key(2))
    assert state.tracker.checkpoint == key(1) and state.tracker.inflight_count == 1
    assert state.checkpoint_to_write() == Checkpoint(SHARD, str(key(1).sequence), None)
    assert state.checkpoint_to_write() is None


def test_an_ack_after_a_drop_moves_no_checkpoint(rr: RoundRobinReader) -> None:
    state = emitted(rr, 1)
    state.drop(rr)
    assert not state.ack(key(1).rank) and state.tracker.checkpoint is None


def test_a_starting_shard_has_nothing_to_ack(rr: RoundRobinReader) -> None:
    state = at(P.STARTING, rr)
    assert not state.ack(key(1).rank) and state.fail(key(1).rank, 0.0) is None


def test_fails_while_draining_are_retried_and_then_dead_lettered(rr: RoundRobinReader) -> None:
    state = emitted(rr, 1)
    state.tracker.retry_limit = 0
    state.drain(rr)
    assert state.fail(key(1).rank, 0.0) is FailOutcome.DEAD_LETTER
    assert [k for k, _record, _n in state.tracker.take_dead_letters()] == [key(1)]
    assert state.dead_letter_written(key(1)) and state.tracker.checkpoint == key(1)


def test_a_finished_shard_writes_its_end_and_ignores_repeated_acks(rr: RoundRobinReader) -> None:
    state = emitted(rr, 1)
    assert state.ack(key(1).rank)
    end = state.finish(rr)
    assert end == Checkpoint(SHARD, str(key(1).sequence), None, shard_end=True)
    assert state.checkpoint_to_write() == end  # what the writer makes for it from now on, every time
    assert not state.ack(key(1).rank)
    assert state.checkpoint_to_write() == end
    state.hand_back()
    assert state.phase is P.HANDED_BACK


def test_a_record_failed_while_reading_with_retries_left_comes_back_after_its_backoff(rr: RoundRobinReader) -> None:
    state = emitted(rr, 1)
    state.tracker.backoff = RetryBackoff(initial_s=2.0, multiplier=2.0, max_s=10.0)
    assert state.fail(key(1).rank, 100.0) is FailOutcome.RETRY
    assert state.tracker.next_retry(101.9) is None, "due 2 s after the failure, not before"
    again = state.tracker.next_retry(102.0)
    assert again is not None and again[0] == key(1)


def test_a_checkpoint_inside_a_kpl_aggregate_keeps_its_user_record_and_the_aggregate_done_stores_none(
        rr: RoundRobinReader) -> None:
    """An aggregate of three user records: acking the first two stores the second's sub-sequence (a restart reads
    the aggregate again and skips up to it); acking the last stores the Kinesis record as done."""
    from datetime import datetime, timezone

    from kinesis_spout.records import Record
    from kinesis_spout.spout.kpl import note_aggregates

    state = at(P.READING, rr)
    users = [Record(SHARD, str(SEQ), sub, f"pk{sub}", b"x", datetime.now(timezone.utc), SequenceKey(SEQ, sub),
                    aggregated=3) for sub in range(3)]
    note_aggregates(state.aggregates, users)
    for user in users:
        assert state.tracker.emit(user.key, 0.0)
    assert state.ack_many([users[0].key.rank, users[1].key.rank])
    assert state.checkpoint_to_write() == Checkpoint(SHARD, str(SEQ), 1)
    assert state.ack(users[2].key.rank)
    assert state.checkpoint_to_write() == Checkpoint(SHARD, str(SEQ), None)


def test_the_aggregates_of_a_take_are_noted_once_each_in_read_order_and_a_count_known_is_kept() -> None:
    """note_aggregates keeps one entry per KPL aggregate of the records taken (plain records have none), in read
    order (the checkpoint forgets them from the front), and never replaces a count noted before (a later take of the
    same aggregate's remaining user records)."""
    from kinesis_spout.records import Record
    from kinesis_spout.spout.kpl import note_aggregates

    def user(seq: int, sub: int, count: int) -> Record:
        return Record(SHARD, str(seq), sub, "pk", b"x", None, SequenceKey(seq, sub), count)

    plain = Record(SHARD, "5", None, "pk", b"x", None, SequenceKey(5, 0))
    aggregates = {3: 7}
    note_aggregates(aggregates, [user(3, 5, 9), user(3, 6, 9), plain, user(8, 0, 2), user(8, 1, 2), user(11, 0, 4)])
    assert list(aggregates.items()) == [(3, 7), (8, 2), (11, 4)]
    note_aggregates(aggregates, iter([user(11, 1, 4), user(12, 0, 1)]))  # any iterable
    assert list(aggregates.items()) == [(3, 7), (8, 2), (11, 4), (12, 1)]
