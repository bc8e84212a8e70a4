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
``--restat GLOB`` (repeatable) records again which functions the tests matching GLOB (fnmatch on node ids) call:
mutmut records that once per test, so a test that reaches a function added or moved since keeps its old record
(the function's mutants then have "no tests") until it is recorded again: pass it for a test file edited since
its tests were first recorded. ``MUTATION_DEBUG=1`` shows pytest's output (e.g. which test failed mutmut's stats run).
Run from the project root, in the mutation venv (``make mutation`` does both).

mutmut copies the package into ``mutants/`` once and rewrites only the mutated modules when they change (it copies
the tests on every run): the driver first refreshes the copies of the other modules that changed since, so the
mutants never run against a stale ``config.py`` or a missing module, and copies the folders the tests import besides
the package (``ALSO_COPY``: the benchmark helpers some unit tests test).
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
#: spark and spout for the others). I/O modules: the integration tests written for them, and their
#: ``test_mutants_<module>.py``.
TESTS_BY_MODULE: dict[str, list[str]] = {
    "kinesis_spout.positions": UNIT,  # tests/unit/core/test_positions.py
    "kinesis_spout.records": UNIT,  # tests/unit/core/test_records.py
    "kinesis_spout.tracker": UNIT,  # tests/unit/core/test_tracker_*.py
    "kinesis_spout.tracking": UNIT,  # inflight, retries, keys, outcomes: tests/unit/core/test_tracker_*.py
    "kinesis_spout.retry": UNIT,  # tests/unit/core/test_retry.py
    "kinesis_spout.config": UNIT,  # its modules: tests/unit/core/test_config*.py
    "kinesis_spout.spout.shards": UNIT,  # a shard's lifecycle: tests/unit/spout/test_shard_lifecycle.py
    "kinesis_spout.checkpoint.base": UNIT,
    "kinesis_spout.checkpoint.memory": UNIT,
    "kinesis_spout.coordination.lineage": UNIT,
    "kinesis_spout.coordination.assignment": UNIT,
    "kinesis_spout.kinesis.aggregation": UNIT,
    "kinesis_spout.spark.batches": UNIT + [INTEGRATION + "test_executor_reads.py::*"],
    "kinesis_spout.spark.offsets": UNIT + [INTEGRATION + "test_spark_source.py::*"],
    "kinesis_spout.checkpoint.writer": [INTEGRATION + f + "::*" for f in (
        "test_checkpoint_writer.py", "test_zookeeper_trouble.py", "test_mutants_writer.py")],
    "kinesis_spout.checkpoint.zookeeper": [INTEGRATION + f + "::*" for f in (
        "test_zookeeper_store.py", "test_zookeeper_trouble.py", "test_checkpoint_writer.py",
        "test_mutants_zookeeper.py", "test_mutants_zookeeper_faults.py")],
    "kinesis_spout.kinesis.getter": [INTEGRATION + f + "::*" for f in (
        "test_reader_backoff.py", "test_faults.py", "test_mutants_getter.py")],
    "kinesis_spout.kinesis.reader": [INTEGRATION + f + "::*" for f in (
        "test_reader_backoff.py", "test_faults.py", "test_mutants_reader.py")],
    "kinesis_spout.spout": [INTEGRATION + f + "::*" for f in (  # its modules but shards
        "test_spout.py", "test_spout_loss_paths.py", "test_mutants_spout.py", "test_mutants_spout_more.py",
        "test_leases.py", "test_mutants_leases.py")],
}

#: Test files outside mutmut's test selection (``pytest_add_cli_args_test_selection`` in pyproject.toml) whose calls
#: this driver records itself at the start of every run, so that the modules listing them above can use them.
#: (mutmut drops tests outside its selection from its records at every start; a change of the selection itself
#: would make it test every mutant again.) The lease tests: nothing else reaches the spout's lease code;
#: the other test_mutants_* files: until they join the selection (which resets mutmut's results once).
EXTRA_TESTS = ["tests/integration/test_leases.py", "tests/integration/test_mutants_spout_more.py",
               "tests/integration/test_mutants_leases.py", "tests/integration/test_mutants_zookeeper_faults.py"]


#: Measured test time (seconds, fastest tests first) run against one mutant of an I/O module, beyond the tests
#: written for its mutants. Each test of an I/O module needs servers, and every mutant runs in a process of its own.
#: 0 (the first pass): only the module's fastest test that reaches the mutated function. $MUTATION_BUDGET_S sets it.
BUDGET_S = float(os.environ.get("MUTATION_BUDGET_S", "0"))


def patterns_for(module: str) -> list[str] | None:
    """The patterns of ``TESTS_BY_MODULE`` for ``module``: its own entry, else that of its closest package listed
    (``kinesis_spout.config`` for ``kinesis_spout.config.groups``), else None (no narrowing)."""
    parts = module.split(".")
    while parts:
        patterns = TESTS_BY_MODULE.get(".".join(parts))
        if patterns is not None:
            return patterns
        parts.pop()
    return None


def narrow(tests: set[str], module: str, duration: dict[str, float]) -> set[str]:
    """The tests of ``tests`` that run against the mutants of ``module``: the module's own, else (a function only
    reached through another module) any; one backend of a test run on both. The module's own unit tests: all of
    them. Of the others, with no budget the fastest one; with a budget every test written for the module's mutants
    and the fastest up to ``BUDGET_S``. mutmut runs them fastest first and stops at the first failure."""
    patterns = patterns_for(module)
    if patterns is None:
        return tests
    own = {t for t in tests if any(fnmatch.fnmatchcase(t, p) for p in patterns)}
    kept = own or set(tests)
    # a test run on both backends: keep the kinesalite run (real sequence numbers), drop the moto one
    kept = {t for t in kept if "[moto_kinesis" not in t or t.replace("[moto_kinesis", "[kinesalite", 1) not in kept}
    unit = {t for t in kept if t.startswith("tests/unit/")} if own else set()  # no servers: all of them
    if unit and patterns == UNIT:
        return unit
    fastest = sorted(kept - unit, key=lambda t: (duration.get(t, 0.0), t))
    if BUDGET_S <= 0:
        return unit | set(fastest[:1])
    chosen = unit | {t for t in kept if "/test_mutants_" in t}
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

#: Folders besides the package and the tests that tests import (mutmut copies neither into mutants/).
ALSO_COPY = ["benchmarks"]


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
    return {key for key in keys if patterns_for(get_module_from_key(key)) == UNIT and any(
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

    if os.environ.get("MUTATION_DEBUG"):  # pytest's output shown, e.g. to see which test failed the stats run
        config().debug = True
    collect = mutmut_main.collect_or_load_stats

    def collect_and_narrow(*a: object, **kw: object) -> None:
        collect(*a, **kw)  # type: ignore[arg-type]
        recorded = set(state().duration_by_test)
        extra = [path for path in EXTRA_TESTS if not any(t.startswith(path + "::") for t in recorded)]
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
