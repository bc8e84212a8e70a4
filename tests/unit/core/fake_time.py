"""A fake clock for the retry tests: time moves only when the code under test sleeps (or the test advances it)."""

from __future__ import annotations


class FakeTime:
    """A clock that only moves when the code under test sleeps (or the test advances it), from ``start``."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0, f"slept {seconds}"
        self.sleeps.append(seconds)
        self.now += seconds
