"""The rounds of a conditional commit against a writer that keeps changing the same keys (the memory backing map, a
real compare-and-set): the commit reads the keys again, recomputes and writes again, losing no update; a writer
that never stops wins for CONFLICT_ROUNDS rounds, after which the batch is failed (retriable) to be replayed."""

from __future__ import annotations

from typing import Any, Sequence

import pytest

from kinesis_spout.state import MemoryBackingMap, NonTransactionalMap, StateError
from kinesis_spout.state.batching import CONFLICT_BACKOFF_MAX_S, CONFLICT_RETRY, CONFLICT_ROUNDS


class Rival(MemoryBackingMap):
    """The memory backing map, where another writer adds 100 to every key just before each of the next ``wins``
    conditional writes (so that write finds the keys changed since they were read)."""

    def __init__(self, name: str, wins: int) -> None:
        super().__init__(name)
        self.wins = wins
        self.writes = 0

    def multi_put_if(self, keys: Sequence[Any], values: Sequence[Any], tokens: Sequence[Any]) -> list[bool]:
        self.writes += 1
        if self.wins:
            self.wins -= 1
            other = MemoryBackingMap(self.name)
            other.multi_put(keys, [(v or 0) + 100 for v in other.multi_get(keys)])
        return super().multi_put_if(keys, values, tokens)


@pytest.fixture
def name(request: pytest.FixtureRequest) -> Any:
    store = f"unit-{request.node.name}"
    MemoryBackingMap.drop(store)
    yield store
    MemoryBackingMap.drop(store)


def add_one(state: NonTransactionalMap, txid: int) -> None:
    state.begin_commit(txid)
    state.multi_update([("a",), ("b",)], [lambda v: (v or 0) + 1] * 2)
    state.commit(txid)


def test_a_commit_that_loses_a_few_rounds_writes_again_and_loses_no_update(name: str) -> None:
    backing = Rival(name, wins=3)
    add_one(NonTransactionalMap(backing), 1)
    assert backing.writes == 4
    assert MemoryBackingMap(name).multi_get([("a",), ("b",)]) == [301, 301]


def test_a_commit_that_keeps_losing_is_failed_after_the_last_round(name: str) -> None:
    backing = Rival(name, wins=10_000)
    expected = rf"2 keys \(e.g. \('a',\)\) kept changing under concurrent writers for {CONFLICT_ROUNDS} rounds;"
    with pytest.raises(StateError, match=expected + " the batch is failed and will be replayed") as lost:
        add_one(NonTransactionalMap(backing), 1)
    assert lost.value.retriable
    assert backing.writes == CONFLICT_ROUNDS == 50


def test_the_pause_between_rounds_is_random_from_nothing_up_to_a_ceiling_doubling_to_50_ms() -> None:
    assert [CONFLICT_RETRY.delay(n, lambda: 1.0) for n in (1, 2, 3, 5, 6, 49)] == pytest.approx(
        [0.002, 0.004, 0.008, 0.032, CONFLICT_BACKOFF_MAX_S, CONFLICT_BACKOFF_MAX_S])
    assert CONFLICT_RETRY.delay(4, lambda: 0.0) == 0.0 and CONFLICT_RETRY.delay(4, lambda: 0.25) == pytest.approx(0.004)
    assert CONFLICT_RETRY.stop_reason(CONFLICT_ROUNDS - 1, 0.0) is None
    assert CONFLICT_RETRY.stop_reason(CONFLICT_ROUNDS, 0.0) == "max_attempts"
