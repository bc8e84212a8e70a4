"""The order in which the suite's tests are queued for pytest-xdist, so that two workers finish together.

``make test`` runs ``pytest -n 2 --dist worksteal``. Worksteal hands each worker a contiguous chunk of the collected
tests at the start (the first ``len // 2`` to one, the rest to the other); a worker that runs out takes the second
half of what the other still has queued. Queuing every slow test first would put all of them in the first chunk:
one worker runs the Spark sessions, crash loops and subprocess drivers one after the other while the other runs
the quick tests, and the minutes of slow tests are shared only by taking from the end of the first worker's queue,
where the last slow tests wait (and a module whose tests share a module-scoped fixture, such as the benchmark
smoke run, is split and pays that fixture on both workers).

:func:`plan` instead shares the slow tests between the chunks by their known cost (longest first, each to the
chunk with the least so far, :data:`KNOWN_COSTS_S`), keeps the tests of a module-scoped fixture in one chunk, and
fills each chunk with quick tests after its slow ones. Both workers start on their longest tests; what is stolen at
the end is quick tests. Called by ``tests/conftest.py`` (``pytest_collection_modifyitems``, in each xdist worker,
after ``-m`` deselected: every worker computes the same order, as xdist requires). It changes only the order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: Seconds each of the costliest tests takes on a quiet 2-core machine, its fixtures' setup included, measured with
#: ``pytest -n 1 -m slow --durations=0`` (then scaled to a quiet machine). A key is a node id or a prefix of node
#: ids: a module's path (each of its tests) or ``path::test`` (each of its parametrisations); the longest key that
#: matches wins. A module-scoped fixture's cost is spread over the tests that share it. A test no key matches costs
#: :data:`DEFAULT_SLOW_S` when it is slow, :data:`DEFAULT_FAST_S` otherwise: a new slow test is placed well enough
#: before it is measured.
KNOWN_COSTS_S: dict[str, float] = {}

#: The cost of a slow test not in :data:`KNOWN_COSTS_S` (a Spark session's query, a subprocess driver, a crash loop).
DEFAULT_SLOW_S = 10.0
#: The cost of any other test.
DEFAULT_FAST_S = 0.2


def cost_of(node_id: str, slow: bool, known: Mapping[str, float] = KNOWN_COSTS_S) -> float:
    """The cost in seconds of the test ``node_id``: the value of the longest key of ``known`` that is the node id or
    a prefix of it ending at a ``::`` or ``[`` boundary (or the module's path); else the default for ``slow``."""
    best = ""
    for key in known:
        if len(key) > len(best) and node_id.startswith(key) and (
                len(key) == len(node_id) or node_id[len(key)] in ":[" or key.endswith(".py")):
            best = key
    if best:
        return known[best]
    return DEFAULT_SLOW_S if slow else DEFAULT_FAST_S


def chunk_sizes(count: int, workers: int) -> list[int]:
    """How many of ``count`` queued tests worksteal hands each of ``workers`` idle workers at the start: the first
    gets ``count // workers``, each next one an equal share of the rest."""
    sizes = []
    left = count
    for index in range(workers):
        size = left // (workers - index)
        sizes.append(size)
        left -= size
    return sizes


def plan(node_ids: Sequence[str], slow: set[str], together: Mapping[str, str], workers: int,
         known: Mapping[str, float] = KNOWN_COSTS_S) -> list[str]:
    """The node ids of ``node_ids`` (in collection order) in the order to queue them for ``workers`` workers.

    ``slow`` are the slow tests; ``together`` maps a slow test to a group name (its module's path when it uses a
    module-scoped fixture): a group stays in one chunk, its tests in collection order. The slow tests and groups
    are dealt to the chunks longest first, each to the chunk with the least cost so far; each chunk is its slow
    tests, longest first, then quick tests in collection order up to the chunk's size (:func:`chunk_sizes`).
    A group costs the sum of its tests' costs. With one worker, or more
    slow tests than a chunk holds, the order is the slow tests longest first, then the rest in collection order.
    """
    units: dict[str, list[str]] = {}
    for node_id in node_ids:
        if node_id in slow:
            units.setdefault(together.get(node_id, node_id), []).append(node_id)
    cost = {name: sum(cost_of(m, True, known) for m in members) for name, members in units.items()}
    position = {node_id: index for index, node_id in enumerate(node_ids)}
    ranked = sorted(units, key=lambda name: (-cost[name], position[units[name][0]]))
    quick = [node_id for node_id in node_ids if node_id not in slow]
    sizes = chunk_sizes(len(node_ids), max(1, workers))
    loads = [0.0] * len(sizes)
    dealt: list[list[str]] = [[] for _ in sizes]
    for name in ranked:
        target = min(range(len(sizes)), key=lambda index: (loads[index], index))
        loads[target] += cost[name]
        dealt[target].extend(units[name])
    if len(sizes) == 1 or any(len(chunk) > size for chunk, size in zip(dealt, sizes)):
        return [node_id for name in ranked for node_id in units[name]] + quick
    order: list[str] = []
    taken = 0
    for chunk, size in zip(dealt, sizes):
        fill = size - len(chunk)
        order.extend(chunk)
        order.extend(quick[taken:taken + fill])
        taken += fill
    return order

