"""Prints the mutation score per module and the surviving mutants, from the results mutmut keeps in ``mutants/``.

Killed: a test failed (or timed out) with the mutant in place. The score is killed / checked mutants of the module
(every mutant but the "not checked" ones); "no tests" and survivors count against it.
Usage: ``python scripts/mutation_report.py [--markdown]``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import tomllib

STATUS = {0: "survived", 1: "killed", 3: "killed", 5: "no tests", 33: "no tests", 34: "skipped", 36: "timeout",
          24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout", None: "not checked"}
DETECTED = {"killed", "timeout"}


def status(code: int | None) -> str:
    return STATUS.get(code, "suspicious")


def main() -> None:
    markdown = "--markdown" in sys.argv[1:]
    modules = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"]
    rows, survivors = [], []
    total = Counter()
    for path in modules:
        meta = Path("mutants") / (path + ".meta")
        if not meta.exists():
            rows.append((path, Counter()))
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        counts = Counter(status(code) for code in codes.values())
        rows.append((path, counts))
        total.update(counts)
        survivors += sorted(f"{status(code)}: {key}" for key, code in codes.items() if status(code) not in DETECTED)
    rows.append(("total", total))

    def line(name: str, c: Counter) -> tuple[str, int, int, int, int, int, int, str]:
        n = sum(c.values())
        checked = n - c["not checked"]
        killed = sum(c[s] for s in DETECTED)
        score = f"{100 * killed / checked:.1f}%" if checked else "-"
        other = checked - killed - c["survived"] - c["no tests"]
        return name, killed, c["survived"], c["no tests"], other, c["not checked"], n, score

    header = ("module", "killed", "survived", "no tests", "other", "not checked", "total", "score")
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|---|" + "---:|" * (len(header) - 1))
        for name, c in rows:
            print("| " + " | ".join(str(x) for x in line(name, c)) + " |")
    else:
        print(f"{header[0]:<40}" + "".join(f"{h:>12}" for h in header[1:]))
        for name, c in rows:
            values = line(name, c)
            print(f"{values[0]:<40}" + "".join(f"{v:>12}" for v in values[1:]))
        if survivors:
            print(f"\nnot killed ({len(survivors)}; `mutmut show NAME` in the mutation venv shows the change):")
            for s in survivors:
                print("  " + s)


if __name__ == "__main__":
    main()
