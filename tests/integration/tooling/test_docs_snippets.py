"""Every ```python block of the documentation site runs as printed, against the test fixtures' servers.

A block runs in this process, in a namespace of its own, from a temporary working directory, with the environment a
reader of the site has after `kinesis-spout dev-servers`: ``KINESIS_SPOUT_ZOOKEEPER``, ``KINESIS_SPOUT_ENDPOINT_URL``
(kinesalite) and ``KINESIS_SPOUT_STREAM`` (a fresh 2-shard stream holding the three sentences of the Quick start),
plus ``REDIS_URL`` for the blocks that use Redis. Blocks that use Spark get the test session's shared Spark session
(their ``SparkSession.builder...getOrCreate()`` returns it). Blocks marked ``<!-- readme-snippet: NAME -->`` run in
test_readme.py; blocks marked ``<!-- not-run ... -->`` are not run, and the comment says why.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest

from .snippets import Block, all_blocks, blocks, doc_pages

SENTENCES = ["the cow jumped over the moon", "an apple a day keeps the doctor away", "   "]
DOC_BLOCKS = [b for page in doc_pages() for b in blocks(page)]
RUN = [b for b in DOC_BLOCKS if b.marker is None]


def test_every_python_block_of_the_site_is_run_somewhere_or_says_why_not() -> None:
    assert RUN, "no runnable block found: is the fence pattern still right?"
    for block in all_blocks():
        assert block.marker is None or block.readme_snippet or block.not_run, (
            f"{block.id}: the comment before the block is {block.marker!r}; use <!-- not-run: WHY --> or "
            f"<!-- readme-snippet: NAME --> (or no comment: the block runs)")


@pytest.fixture
def reader_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, zookeeper: Any, kinesalite: Any) -> Iterator[str]:
    """The environment of a reader after `kinesis-spout dev-servers` and the Quick start's put: returns the stream."""
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [s.encode() for s in SENTENCES], partition_keys=SENTENCES)
    for name in list(os.environ):
        if name.startswith("KINESIS_SPOUT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("KINESIS_SPOUT_ZOOKEEPER", zookeeper.hosts)
    monkeypatch.setenv("KINESIS_SPOUT_ENDPOINT_URL", kinesalite.endpoint_url)
    monkeypatch.setenv("KINESIS_SPOUT_STREAM", stream)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.chdir(tmp_path)  # dead letters, tables, files: in the test's own folder
    yield stream


def run_block(block: Block) -> None:
    code = compile(block.code, block.id, "exec")
    exec(code, {"__name__": "__docs_snippet__"})  # noqa: S102 - the documentation's own code, as a reader runs it


@pytest.mark.parametrize("block", [b for b in RUN if not b.uses_spark], ids=lambda b: b.id)
def test_a_docs_snippet_runs(block: Block, reader_env: str) -> None:
    run_block(block)


@pytest.fixture(scope="module")
def warm_spark(spark: Any) -> Any:
    """The shared Spark session with its Python workers started: a reader's session has run jobs before, and the
    first Python job of a session (tens of seconds on a loaded machine) would otherwise come out of the time a
    block gives its own work (``pipeline.run(..., timeout_s=...)``)."""
    assert spark.sparkContext.parallelize(range(4), 2).map(lambda n: n + 1).sum() == 10
    return spark


@pytest.mark.parametrize("block", [b for b in RUN if b.uses_spark], ids=lambda b: b.id)
def test_a_docs_snippet_on_spark_runs(block: Block, reader_env: str, warm_spark: Any, redis: Any,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", redis.url)
    run_block(block)
