"""The lease assignment rule: even, sticky, never two owners, a few moves a round, the same plan from views a few
takes apart; exactly: the extra shards go to the workers holding more than their share, the free ones only to
workers below their quota, and a plan's ``wait`` lists only this worker's shards. Pure, no servers."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_spout.coordination.assignment import Plan, assign, plan

SHARDS = [f"shardId-{i:012d}" for i in range(8)]
FOUR = SHARDS[:4]


def counts(target: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for worker in target.values():
        out[worker] = out.get(worker, 0) + 1
    return out


def test_free_shards_spread_evenly_over_the_workers() -> None:
    target = assign(SHARDS, ["b", "a", "c"], {})
    assert set(target) == set(SHARDS)
    assert sorted(counts(target).values()) == [2, 3, 3]


def test_nothing_moves_when_nothing_changes() -> None:
    owners = {s: ("a" if i < 4 else "b") for i, s in enumerate(SHARDS)}
    assert assign(SHARDS, ["a", "b"], owners) == owners


def test_a_joining_worker_gets_its_share_from_the_others_only() -> None:
    owners = {s: ("a" if i < 4 else "b") for i, s in enumerate(SHARDS)}
    target = assign(SHARDS, ["a", "b", "c"], owners)
    assert sorted(counts(target).values()) == [2, 3, 3]
    assert all(target[s] in (owners[s], "c") for s in SHARDS), "a shard moved between two old workers"


def test_a_dead_workers_shards_go_to_the_live_ones() -> None:
    owners = {s: ["a", "b", "c"][i % 3] for i, s in enumerate(SHARDS)}
    target = assign(SHARDS, ["a", "c"], owners)
    assert sorted(counts(target).values()) == [4, 4]
    assert all(target[s] == owners[s] for s in SHARDS if owners[s] != "b")


def test_a_worker_takes_only_free_shards_and_gives_back_a_few_a_round() -> None:
    owners = {s: "a" for s in SHARDS}
    joining = plan("b", SHARDS, ["a", "b"], owners, held=[])
    assert joining.take == [] and len(joining.wait) == 4  # a still owns them: b waits for a to give them back
    giving = plan("a", SHARDS, ["a", "b"], owners, held=SHARDS, max_moves=2)
    assert len(giving.release) == 2 and not giving.take
    finished = plan("a", SHARDS[1:], ["a"], owners, held=SHARDS)
    assert finished.release == [SHARDS[0]]  # a finished shard's lease is given back at once


def test_after_a_lost_session_a_worker_takes_its_own_old_leases_again() -> None:
    owners = {s: "a" for s in SHARDS[:2]}
    step = plan("a", SHARDS[:2], ["a"], owners, held=[])
    assert step.take == SHARDS[:2]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6, unique=True),
       st.integers(0, 2 ** 32))
def test_rounds_converge_to_an_even_split_without_ever_two_owners(n_shards: int, workers: list[str],
                                                                  seed: int) -> None:
    """Workers act one at a time, in a random order each round, on the current state; a lease changes hands only
    through 'free' (given back, or its owner gone)."""
    rng = random.Random(seed)
    shards = [f"s{i:03d}" for i in range(n_shards)]
    owners: dict[str, str | None] = {s: rng.choice(workers + [None, "gone"]) for s in shards}
    for _ in range(n_shards + 4):  # a round: every worker acts once, in a random order
        for me in rng.sample(workers, len(workers)):
            held = [s for s, o in owners.items() if o == me]
            step = plan(me, shards, workers, owners, held, max_moves=2)
            for s in step.release:
                owners[s] = None
            for s in step.take:
                assert owners[s] in (None, "gone", me), "took a lease from a live owner"
                owners[s] = me
    live_counts = [sum(1 for o in owners.values() if o == w) for w in workers]
    assert all(o in workers for o in owners.values()), "a shard was left without a live owner"
    assert max(live_counts) - min(live_counts) <= 1


def test_a_lease_that_names_the_worker_counts_as_its_own_even_when_not_held() -> None:
    """A take whose reply was lost, or a give-back whose write failed: the lease names ``a`` though ``a`` does not
    hold it. It is given back when assigned to another worker (or gone), taken again when assigned to ``a``."""
    owners = {s: "a" for s in SHARDS[:2]}
    step = plan("a", SHARDS[:2], ["a", "b"], owners, held=[SHARDS[0]])
    assert step.release == [SHARDS[1]] and step.take == []
    gone = plan("a", SHARDS[:1], ["a"], owners, held=[SHARDS[0]])
    assert gone.release == [SHARDS[1]]
    alone = plan("a", SHARDS[:2], ["a"], owners, held=[SHARDS[0]])
    assert alone.take == [SHARDS[1]] and alone.release == []


def test_a_hand_over_begun_in_an_earlier_round_comes_first_among_the_moves() -> None:
    """``a`` owns all 8 shards and ``b`` joined: 4 are to move, 1 a round. The one whose hand-over began (and could
    not finish) is given up again before any other, so its worker does not start a second hand-over meanwhile."""
    owners = {s: "a" for s in SHARDS}
    step = plan("a", SHARDS, ["a", "b"], owners, SHARDS, max_moves=1)
    assert step.release == [SHARDS[4]]
    again = plan("a", SHARDS, ["a", "b"], owners, SHARDS, max_moves=1, handing=[SHARDS[7]])
    assert again.release == [SHARDS[7]]
    assert plan("a", SHARDS, ["a", "b"], owners, SHARDS, max_moves=2, handing=[SHARDS[7]]).release == \
        [SHARDS[7], SHARDS[4]]
    assert plan("a", SHARDS, ["a"], owners, SHARDS, max_moves=1, handing=[SHARDS[7]]).release == [], \
        "a shard that is its worker's to read again is not given up"


# ------------------------------------------------------------------ exactly who gets which shard


def test_an_uneven_split_keeps_every_shard_where_it_is() -> None:
    owners = {FOUR[0]: "a", FOUR[1]: "z", FOUR[2]: "z"}
    assert assign(FOUR[:3], ["a", "z"], owners) == owners  # z holds two: the extra shard is z's


def test_the_extra_shards_go_to_the_workers_holding_more_than_their_share_ties_by_id() -> None:
    owners = {FOUR[0]: "z", FOUR[1]: "z", FOUR[2]: "m", FOUR[3]: "m"}
    target = assign(FOUR, ["a", "m", "z"], owners)
    # 4 shards, 3 workers: one has 2; m and z hold 2 each, the tie goes to m; z gives its second shard to a
    assert target == {FOUR[0]: "z", FOUR[1]: "a", FOUR[2]: "m", FOUR[3]: "m"}


def test_free_shards_go_only_to_workers_below_their_quota() -> None:
    owners = {FOUR[0]: "z"}
    target = assign(FOUR, ["b", "z"], owners)
    assert target[FOUR[0]] == "z" and counts(target) == {"b": 2, "z": 2}


def test_with_nothing_held_the_extra_shard_goes_to_the_first_worker_by_id() -> None:
    assert counts(assign(FOUR[:3], ["b", "a"], {})) == {"a": 2, "b": 1}


def test_wait_lists_the_shards_assigned_here_that_a_live_worker_still_owns() -> None:
    owners = {FOUR[0]: "a", FOUR[1]: "a", FOUR[2]: "a"}
    step = plan("b", FOUR, ["a", "b"], owners, held=[])
    assert step == Plan(take=[FOUR[3]], release=[], wait=[FOUR[2]])
    assert plan("a", FOUR, ["a", "b"], owners, held=FOUR[:3]) == Plan(take=[], release=[FOUR[2]], wait=[])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 60), st.lists(st.sampled_from("abcdef"), min_size=2, max_size=6, unique=True),
       st.integers(0, 2 ** 32))
def test_a_worker_that_took_its_free_shards_changes_no_other_workers_plan(n_shards: int, workers: list[str],
                                                                          seed: int) -> None:
    """Workers plan from views a few takes apart (a failover: each takes a dead worker's shards at once). A worker
    that took the free shards its plan gave it, or the first of them by id, changes no other worker's free shards:
    the others' takes never race it for the same leases."""
    rng = random.Random(seed)
    shards = [f"s{i:03d}" for i in range(n_shards)]
    owners: dict[str, str | None] = {s: rng.choice(workers + [None, "gone", "gone"]) for s in shards}
    before = assign(shards, workers, owners)
    me = rng.choice(workers)
    mine = sorted(s for s, w in before.items() if w == me and owners[s] in (None, "gone"))
    took = mine[:rng.randint(0, len(mine))]
    after_owners = {**owners, **{s: me for s in took}}
    after = assign(shards, workers, after_owners)
    still_free = [s for s in shards if after_owners[s] in (None, "gone")]
    assert {s: after[s] for s in still_free} == {s: before[s] for s in still_free}
