"""``readMode=auto``: reading on the driver on ``local[...]`` and on the executors on a cluster, decided by the Spark
master :func:`kinesis_spout.spark.register` records on the class it registers, which survives the pickling that
takes it to Spark's Python processes."""

from __future__ import annotations

import pytest
from pyspark import cloudpickle  # what Spark pickles a registered data source with

from kinesis_spout.errors import ConfigError
from kinesis_spout.spark.source import ExecutorStreamReader, KinesisSpoutDataSource, KinesisSpoutStreamReader
from kinesis_spout.spark.source.datasource import source_for
from kinesis_spout.spark.source.offsets import choose_read_mode, parse_source_options

OPTIONS = {"streamName": "s", "appName": "a", "zookeeper": "127.0.0.1:1"}


@pytest.mark.parametrize(("master", "mode"), [
    ("local", "driver"), ("local[2]", "driver"), ("local[*]", "driver"), ("LOCAL[4, 2]", "driver"),
    ("local-cluster[2,1,1024]", "executors"), ("spark://10.0.0.1:7077", "executors"), ("yarn", "executors"),
    ("k8s://https://k8s:443", "executors"), (None, "driver"),
])
def test_auto_reads_on_the_driver_on_one_machine_and_on_the_executors_on_a_cluster(master: str | None,
                                                                                 mode: str) -> None:
    assert choose_read_mode("auto", master) == mode
    assert choose_read_mode("driver", master) == "driver"
    assert choose_read_mode("executors", master) == "executors"


def test_auto_is_the_default_and_a_wrong_mode_names_the_choices() -> None:
    assert parse_source_options(OPTIONS)[1].read_mode == "auto"
    assert parse_source_options({**OPTIONS, "readmode": "AUTO"})[1].read_mode == "auto"
    with pytest.raises(ConfigError, match="'readMode' must be one of auto, driver, executors"):
        parse_source_options({**OPTIONS, "readMode": "cluster"})


@pytest.mark.parametrize(("master", "reader"), [("spark://10.0.0.1:7077", ExecutorStreamReader),
                                                ("local[2]", KinesisSpoutStreamReader)])
def test_the_registered_class_keeps_its_master_through_pickling_and_picks_its_reader(master: str, reader: type
                                                                                     ) -> None:
    source = cloudpickle.loads(cloudpickle.dumps(source_for(master)))
    assert source.spark_master == master and issubclass(source, KinesisSpoutDataSource)
    assert source.name() == "kinesis_spout"
    assert type(source(OPTIONS).streamReader("unused")) is reader
    explicit = source({**OPTIONS, "readMode": "driver"}).streamReader("unused")
    assert type(explicit) is KinesisSpoutStreamReader, "an explicit readMode wins"
    assert KinesisSpoutDataSource.spark_master is None, "the module's class is not changed"
