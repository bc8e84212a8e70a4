"""A SpoutPipeline over several streams refuses, with the fix, what takes one stream: exactly_once and a given
checkpoint_store (no server: refused by the constructor)."""

from __future__ import annotations

from typing import Any

import pytest

from kinesis_spout import ConfigError, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.spark import SpoutPipeline
from kinesis_spout.state.memory import MemoryBackingMap

CONFIG = SpoutConfig(stream_name=["clicks", "orders"], app_name="shop")


def process(df: Any, batch: Any) -> None:
    return None


def test_exactly_once_and_a_checkpoint_store_are_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="one exactly-once SpoutPipeline per stream"):
        SpoutPipeline(None, CONFIG, process, exactly_once=MemoryBackingMap.factory())
    with pytest.raises(ConfigError, match="leave checkpoint_store out"):
        SpoutPipeline(None, CONFIG, process, checkpoint_store=MemoryCheckpointStore())
    assert SpoutPipeline(None, CONFIG, process).config.stream_names == ("clicks", "orders")
