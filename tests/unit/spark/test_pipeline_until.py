"""``SpoutPipeline.run(until=...)`` takes a callable or "caught_up"; anything else, or "caught_up" with leases, is
refused before the run opens anything, naming what it takes."""

from __future__ import annotations

import pytest

from kinesis_spout import SpoutConfig
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.errors import ConfigError
from kinesis_spout.spark.pipeline import SpoutPipeline


def pipeline(**config: str) -> SpoutPipeline:
    return SpoutPipeline(None, SpoutConfig(stream_name="s", app_name="a", **config), lambda df, b: None,
                         checkpoint_store=MemoryCheckpointStore())


@pytest.mark.parametrize("until", ["caught-up", "CAUGHT_UP", 3])
def test_until_refuses_what_is_neither_a_callable_nor_caught_up(until: object) -> None:
    with pytest.raises(ConfigError, match=r"until must be a callable .* or 'caught_up'"):
        pipeline().run(until=until, timeout_s=0)  # type: ignore[arg-type]


def test_caught_up_refuses_leases() -> None:
    with pytest.raises(ConfigError, match=r"until='caught_up' needs .* coordination='leases'"):
        pipeline(coordination="leases").run(until="caught_up", timeout_s=0)
