"""How the unit tests run under mutation testing (mutmut runs a copy of the tests in ``mutants/``): Hypothesis tests
there stop at the first failing example, with no shrinking of it (a mutant is killed by the failure either way, and
shrinking took most of a round's time)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import Phase

#: True in mutmut's copy of the tests.
UNDER_MUTATION = "mutants" in Path(__file__).resolve().parts
#: The Hypothesis phases to run: all of them, but no shrinking under mutation.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate) if UNDER_MUTATION else tuple(Phase)
