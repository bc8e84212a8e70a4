"""The per-record tracker's own cases (emits, acks and checkpoints; failures, retries, timeouts and dead letters)
run against the span tracker: the same module-level tests, with the tracker class swapped for SpanTracker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kinesis_spout.tracking.spans import SpanTracker

from . import test_tracker_checkpoints as checkpoints
from . import test_tracker_retries as retries
from .test_tracker_checkpoints import *  # noqa: F403 - the cases, collected here again
from .test_tracker_retries import *  # noqa: F403


@pytest.fixture(autouse=True)
def span_tracker(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for module in (checkpoints, retries):
        monkeypatch.setattr(module, "InflightRecordTracker", SpanTracker)
    yield
