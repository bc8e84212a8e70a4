"""SpoutPipeline's exactly-once mode needs a checkpoint store that can own the app and stream; the default mode
does not."""

from __future__ import annotations

import pytest

from kinesis_spout import SpoutConfig
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.errors import ConfigError
from kinesis_spout.spark.pipeline import SpoutPipeline
from kinesis_spout.state import MemoryBackingMap


class NoOwnershipStore:
    """A checkpoint store of a user's making: checkpoints (kept by a memory store it wraps), no ownership."""

    def __init__(self) -> None:
        self.inner = MemoryCheckpointStore()
        self.open, self.close, self.load, self.save = (self.inner.open, self.inner.close, self.inner.load,
                                                       self.inner.save)
        self.list, self.delete = self.inner.list, self.inner.delete


def test_exactly_once_refuses_a_store_that_cannot_own_and_the_default_mode_does_not_need_one() -> None:
    config = SpoutConfig(stream_name="s", app_name="a")
    with pytest.raises(ConfigError, match=r"exactly_once needs a checkpoint store that can own .*NoOwnershipStore has "
                                          r"none"):
        SpoutPipeline(None, config, lambda df, b: None, checkpoint_store=NoOwnershipStore(),
                      exactly_once=MemoryBackingMap.factory("unit-own"))
    assert SpoutPipeline(None, config, lambda df, b: None, checkpoint_store=NoOwnershipStore()).exactly_once is None
    assert SpoutPipeline(None, config, lambda df, b: None, checkpoint_store=MemoryCheckpointStore(),
                         exactly_once=MemoryBackingMap.factory("unit-own")).exactly_once is not None


@pytest.mark.parametrize(("session_timeout_s", "wait_s"), [(2.0, 4.0), (4.0, 6.0), (10.0, 15.0), (40.0, 60.0)])
def test_the_wait_for_a_previous_owner_covers_zookeepers_expiry_tick(session_timeout_s: float,
                                                                     wait_s: float) -> None:
    """ZooKeeper expires sessions in buckets of its tickTime, up to one tick late, and a session timeout is at
    least two ticks: the wait is the timeout plus half of it (at least 2 s)."""
    from kinesis_spout.spark.pipeline import previous_owner_wait_s

    assert previous_owner_wait_s(session_timeout_s) == pytest.approx(wait_s)
