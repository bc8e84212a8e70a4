"""Dead-letter storms: when so many records are dead-lettered that the spout should stop rather than write them all.

PURE: no threads, clocks or I/O. :class:`StormRules` counts records in the order the spout reads them and says when
a rule trips; the spout's dead-letter glue (:mod:`kinesis_spout.spout.dead_letters`) feeds it and acts on a trip.

Two rules, each disabled by 0 or None:

- **in a row**: ``max_in_a_row`` dead letters with no record decoded between them (a record its scheme decoded, at
  its first emission, ends the run);
- **ratio**: more than ``max_ratio`` of the last ``window`` records read were dead-lettered, while at least
  ``min_in_window`` dead letters are among them. A record decoded counts as good when it is read; if it is later
  dead-lettered (its retries ran out) one good record of the window turns bad, so a downstream outage that fails
  everything reaches a ratio near 1.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["StormRules", "StormTrip"]


@dataclass(frozen=True)
class StormTrip:
    """A rule tripped: ``rule`` is its flat setting name, ``limit`` its value, ``summary`` the counts in words."""

    rule: str
    limit: float
    summary: str


class StormRules:
    """The two storm rules over the records read. Who calls: the spout's dead-letter glue, with the spout's lock held
    (one caller at a time); every method changes only this object's counters.

    The window is kept as runs ``[is_dead, count]`` (oldest first) whose counts add up to at most ``window``.
    """

    def __init__(self, max_in_a_row: int | None, max_ratio: float | None, window: int | None,
                 min_in_window: int | None) -> None:
        self.max_in_a_row = max_in_a_row or 0
        self.max_ratio = max_ratio or 0.0
        self.window = (window or 0) if self.max_ratio else 0
        self.min_in_window = min_in_window or 0
        self.in_a_row = 0  # dead letters since the last record decoded
        self.good = 0  # records decoded, in the window
        self.dead = 0  # dead letters, in the window
        self._runs: deque[list[int]] = deque()

    def decoded(self, count: int) -> None:
        """``count`` records were read and decoded (at their first emission): they end the run of dead letters."""
        if count <= 0:
            return
        self.in_a_row = 0
        self._push(0, count)

    def dead_lettered(self, read_now: bool) -> StormTrip | None:
        """One more dead letter. ``read_now``: the record was given up as it was read (its scheme refused it);
        otherwise it was read, decoded and counted good before, and its retries ran out now. Returns the rule that
        tripped, if one did."""
        self.in_a_row += 1
        if self.window:
            if not read_now and self.good:
                self._turn_one_bad()
            else:
                self._push(1, 1)
        if self.max_in_a_row and self.in_a_row >= self.max_in_a_row:
            return StormTrip("max_dead_letters_in_a_row", self.max_in_a_row,
                             f"{self.in_a_row} dead letters in a row, with no record decoded between them")
        if self.window and self.dead >= max(self.min_in_window, 1) and \
                self.dead > self.max_ratio * (self.good + self.dead):
            return StormTrip("max_dead_letter_ratio", self.max_ratio,
                             f"{self.dead} dead letters among the last {self.good + self.dead} records read "
                             f"({self.dead / (self.good + self.dead):.0%}, over {self.max_ratio:g} of "
                             f"dead_letter_window={self.window}; min_dead_letters_in_window={self.min_in_window})")
        return None

    def _push(self, dead: int, count: int) -> None:
        """Append ``count`` records (dead or good) and drop the oldest beyond the window."""
        if not self.window:
            return
        count = min(count, self.window)
        runs = self._runs
        if runs and runs[-1][0] == dead:
            runs[-1][1] += count
        else:
            runs.append([dead, count])
        if dead:
            self.dead += count
        else:
            self.good += count
        excess = self.good + self.dead - self.window
        while excess > 0:
            head = runs[0]
            drop = min(excess, head[1])
            head[1] -= drop
            excess -= drop
            if head[0]:
                self.dead -= drop
            else:
                self.good -= drop
            if not head[1]:
                runs.popleft()

    def _turn_one_bad(self) -> None:
        """A record counted good turned out dead: the oldest good record of the window becomes a dead letter at the
        newest end (the window keeps its size)."""
        for i, run in enumerate(self._runs):
            if not run[0]:
                run[1] -= 1
                if not run[1]:
                    del self._runs[i]
                break
        self.good -= 1
        runs = self._runs
        if runs and runs[-1][0]:
            runs[-1][1] += 1
        else:
            runs.append([1, 1])
        self.dead += 1
