"""What a pipeline's ``process(df, batch)`` is given besides the DataFrame, and how its answer is read.

A :class:`Batch` describes one micro-batch: its id (a txid, as in Trident) and a few figures. The answer of
``process`` says which records failed; :func:`failed_message_ids` turns any accepted form of it into a set of
message ids. pyspark is imported lazily and only to recognise a DataFrame.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

__all__ = ["Batch", "failed_message_ids"]


@dataclass(frozen=True)
class Batch:
    """One micro-batch of :class:`~kinesis_spout.spark.SpoutPipeline`, as ``process(df, batch)`` sees it.

    ``id`` is the batch id (Trident's txid). The pipeline stores it in ZooKeeper, next to the checkpoints
    (``{prefix}/{app}/{stream}/batch_id``), *before* it calls ``process``. What that gives a sink:

    - ids only increase, across restarts too. The stored id is the id of the last batch handed to
      ``process``; a number is skipped only when the run ends (a crash, a Spark error) between storing an id
      and calling ``process``;
    - an id stands for one set of records, ever, for this app and stream (there must be one pipeline per app
      and stream). When ``process`` raises (or answers in a form it does not accept), the pipeline tries the
      *same* batch again: the same records, the same ``id``, with ``attempt`` 2, 3, ... (after a backoff, up to
      ``batch_retry_limit`` more tries within ``batch_retry_deadline_s``). A sink that stores ``(batch.id,
      value)`` may therefore skip what an earlier try of the batch already wrote: the retry holds exactly those
      records. A batch that fails every try ends ``run()`` with
      :class:`~kinesis_spout.errors.BatchFailedError`; its records are neither acked nor failed, and the next run
      reads them again under a *new* id. A crash, too, never makes a later batch reuse an id;
    - it is not a transactional replay across runs: the records of a batch that failed for good or was cut short
      by a crash, and records that ``process`` failed by name (they go through the spout's retry queue), come
      back in a *later* batch, under a new id, possibly mixed with other records (at-least-once). To drop those
      duplicates, key the sink on ``message_id`` (unique per record), not on the batch id.

    ``records`` and ``bytes`` count the batch (bytes are data plus partition keys); ``retries`` counts its
    records that are emitted again after a failure (``attempt`` > 1), ``max_attempt`` is their highest
    attempt; ``shards`` are the shards the batch has records of; ``started_at`` is when its first record was
    taken from the spout (UTC). ``attempt`` is the try of this batch (1 first; each try gets a new Batch object),
    not the records' own ``attempt`` column, which counts their re-emissions by the spout.
    """

    id: int
    records: int
    bytes: int
    retries: int
    max_attempt: int
    shards: tuple[str, ...]
    started_at: datetime
    attempt: int = 1


def failed_message_ids(result: Any) -> set[str]:
    """The message ids that ``process`` reported as failed. Called by the pipeline once per batch.

    Accepted answers: ``None`` (every record succeeded), an iterable of message id strings, or a Spark
    DataFrame with a ``message_id`` column (rows derived from a record keep its id, so failing a derived row
    fails its root record). For a DataFrame only the distinct values of that one column are collected to the
    driver. Anything else raises ``TypeError`` naming what to return instead.
    """
    if result is None:
        return set()
    if _is_dataframe(result):
        if "message_id" not in result.columns:
            raise TypeError(f"process() returned a DataFrame without a message_id column (columns: "
                            f"{', '.join(result.columns) or 'none'}); keep the message_id column of the rows "
                            f"that failed, or return a list of message ids")
        return {row[0] for row in result.select("message_id").distinct().collect() if row[0] is not None}
    if isinstance(result, (str, bytes)) or not isinstance(result, Iterable):
        raise TypeError(f"process() returned {type(result).__name__}; return None when every record succeeded, "
                        f"or the failed records as a list of message ids or a DataFrame with a message_id column")
    ids = set()
    for mid in result:
        if not isinstance(mid, str):
            raise TypeError(f"process() returned a failed message id of type {type(mid).__name__} ({mid!r}); "
                            f"message ids are strings like 'shardId-000000000000:49590338271490256608559692538361'")
        ids.add(mid)
    return ids


def _is_dataframe(value: Any) -> bool:
    try:
        from pyspark.sql import DataFrame
    except ImportError:  # pragma: no cover - pyspark is a dependency; without it nothing is a DataFrame
        return False
    return isinstance(value, DataFrame)
