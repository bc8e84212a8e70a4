"""What the demo prints is meant for a person: moto's own request logging stays out of it."""

from __future__ import annotations

import logging
from typing import Iterator

import pytest
from botocore.exceptions import ClientError

from kinesis_spout.demo import MOTO_SERVER_LOGGERS, embedded_servers
from kinesis_spout.kinesis.client import make_client


@pytest.fixture
def moto_server_log_levels() -> Iterator[None]:
    """The demo silences moto's web server for the rest of its process: give the levels back to the test session."""
    loggers = [logging.getLogger(name) for name in MOTO_SERVER_LOGGERS]
    levels = [logger.level for logger in loggers]
    yield
    for logger, level in zip(loggers, levels):
        logger.setLevel(level)


def test_a_crash_inside_the_embedded_moto_server_logs_no_traceback(zookeeper, caplog, monkeypatch,
                                                                   moto_server_log_levels) -> None:
    """moto answers 500 when it raises inside a request (in the demo: a race of its own between PutRecords and
    GetRecords); werkzeug logged a 45-line traceback for each, in the middle of the demo's output."""
    caplog.set_level(logging.DEBUG)
    with embedded_servers(None, zookeeper.hosts) as (endpoint, _zk):
        client = make_client("us-east-1", endpoint)
        client.create_stream(StreamName="sentences", ShardCount=1)
        for _ in range(2):  # the second request is answered after the first one's log (one connection, in order)
            with pytest.raises(ClientError, match=r"\(500\)"):  # moto raises decoding the iterator: a 500
                client.get_records(ShardIterator="not-an-iterator")
        client.list_streams()
    noisy = [r for r in caplog.records if r.name.split(".")[0] in MOTO_SERVER_LOGGERS]
    assert not noisy, [f"{r.name} {r.levelname}: {r.getMessage()[:200]}" for r in noisy]
