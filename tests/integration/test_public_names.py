"""The names a user imports from the package's top: each is the one the library raises or takes, not a copy."""

from __future__ import annotations

import kinesis_spout
from kinesis_spout import errors, retry


def test_retry_error_is_one_class_of_the_error_tree_importable_from_the_top_and_from_retry() -> None:
    assert kinesis_spout.RetryError is errors.RetryError is retry.RetryError
    assert issubclass(kinesis_spout.RetryError, kinesis_spout.SpoutError)
    assert "RetryError" in kinesis_spout.__all__ and "RetryError" in retry.__all__
    cause = OSError("connection refused")
    error = kinesis_spout.RetryError("put: gave up", last=cause, attempts=3, elapsed_s=1.5)
    assert (str(error), error.last, error.attempts, error.elapsed_s, error.retriable) == (
        "put: gave up", cause, 3, 1.5, False)
