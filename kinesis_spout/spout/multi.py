"""MultiStreamSpout: several Kinesis streams read as one spout, by one :class:`KinesisSpout` per stream.

Composition, not a second spout: each stream has its own spout (its readers, trackers, checkpoints under
``{prefix}/{app}/{stream}/checkpoints``, leases under ``.../{stream}/leases``, dead letters, initial position from
:meth:`SpoutConfig.for_stream`). This class takes records from them in turn and routes acks and fails back by the
stream named in the message id: a tuple's id is ``"{stream}/{shard_id}:{sequence_number}"`` (a stream name holds no
'/'), so ids of equal shard ids in two streams never meet. :func:`split_message_id` splits one.

Threads: as :class:`KinesisSpout` (any thread); this class keeps only the turn (``_turn``) and a counter under its own
small lock, and each spout's state stays under that spout's lock.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from types import TracebackType
from typing import Any, Iterable, Iterator, Mapping

from kinesis_spout.checkpoint.base import CheckpointStore
from kinesis_spout.config import SpoutConfig
from kinesis_spout.errors import ConfigError, SpoutError
from kinesis_spout.metrics.shard import ShardMetrics
from kinesis_spout.records import SpoutTuple
from kinesis_spout.spout.batch import SpoutBatch
from kinesis_spout.spout.facade import KinesisSpout

__all__ = ["MultiStreamBatch", "MultiStreamSpout", "split_message_id"]

log = logging.getLogger(__name__)

#: While no stream has a record, how long one wait on one stream's spout lasts before the next stream is asked.
WAIT_SLICE_S = 0.02


def split_message_id(mid: str) -> tuple[str, str]:
    """``("clicks", "shardId-000000000000:4959...")`` from a message id of a :class:`MultiStreamSpout`; ``("",
    mid)`` for an id that names no stream (a single stream's id)."""
    stream, sep, rest = mid.partition("/")
    return (stream, rest) if sep else ("", mid)


def _outer(stream: str, t: SpoutTuple) -> SpoutTuple:
    return SpoutTuple(f"{stream}/{t.message_id}", t.record, t.values, t.attempt)


class MultiStreamBatch(list[SpoutTuple]):
    """What :meth:`MultiStreamSpout.next_batch` returns: the tuples of several streams (their ids name the stream),
    ackable whole like a :class:`~kinesis_spout.spout.batch.SpoutBatch`: :meth:`ack`, :meth:`fail`,
    :meth:`ack_except` act on each stream's own batch (one span ack per shard). ``+`` and ``+=`` keep that."""

    __slots__ = ("_spout", "_parts")

    def __init__(self, spout: MultiStreamSpout, tuples: Iterable[SpoutTuple] = ()) -> None:
        super().__init__()
        self._spout = spout
        self._parts: dict[str, SpoutBatch] = {}  # stream -> its spout's batch (ids without the stream)
        self += tuples

    def add(self, stream: str, part: SpoutBatch) -> None:
        """Called by the spout: ``part`` (a batch of ``stream``'s spout) joins this batch."""
        list.extend(self, (_outer(stream, t) for t in part))
        have = self._parts.get(stream)
        if have is None:
            self._parts[stream] = part
        else:
            have += part

    def ack(self) -> None:
        """Every tuple of the batch was processed: each stream's batch is acked (see ``SpoutBatch.ack``)."""
        self.ack_except(())

    def fail(self, message_ids: Iterable[str]) -> None:
        """These tuples failed: each stream's batch fails its own (see ``SpoutBatch.fail``)."""
        for stream, ids in self._spout.by_stream(message_ids).items():
            part = self._parts.get(stream)
            if part is not None:
                part.fail(ids)
            else:
                self._spout.spout(stream).fail_many(ids)

    def ack_except(self, failed_ids: Iterable[str]) -> None:
        """Fail ``failed_ids`` and ack every other tuple, stream by stream (see ``SpoutBatch.ack_except``)."""
        failed = self._spout.by_stream(failed_ids)
        for stream in sorted(set(failed) - set(self._parts)):
            self._spout.spout(stream).fail_many(failed[stream])
        for stream, part in self._parts.items():
            part.ack_except(failed.get(stream, ()))

    def __iadd__(self, other: Iterable[SpoutTuple]) -> MultiStreamBatch:  # type: ignore[override]
        if isinstance(other, MultiStreamBatch):
            for stream, part in other._parts.items():
                self.add(stream, part + [])  # a copy: the other batch's parts stay its own
            return self
        for stream, inner in self._spout.by_stream(list(other)).items():  # tuples from elsewhere: acked by id
            part = self._spout.spout(stream).next_batch(max_records=0)
            part += inner
            self.add(stream, part)
        return self

    def __add__(self, other: Iterable[SpoutTuple]) -> MultiStreamBatch:  # type: ignore[override]
        merged = MultiStreamBatch(self._spout, self)
        merged += other
        return merged


class MultiStreamSpout:
    """Reads the streams of ``config.stream_names`` (two or more) with per-record ack/fail and per-stream
    checkpoints: ``open()``, ``next_tuple()``, ``next_batch()``, ``ack``/``fail`` (by the ids it hands out),
    ``metrics()`` (each shard's figures with its ``stream_name``), ``close()``.

    ``checkpoint_stores``: a store per stream (e.g. a ``MemoryCheckpointStore`` each); left out, each stream's
    checkpoints are in ZooKeeper under its own path. ``client``: one boto3 Kinesis client for all streams (tests).
    The constructor does no I/O; ``open()`` opens the streams' spouts in order (a stream that does not exist fails
    it, naming the stream, and closes those opened); ``close()`` closes them all and is idempotent.
    """

    def __init__(self, config: SpoutConfig, checkpoint_stores: Mapping[str, CheckpointStore] | None = None, *,
                 client: Any = None) -> None:
        if not isinstance(config, SpoutConfig):
            raise TypeError(f"config must be a SpoutConfig, got {type(config).__name__}")
        names = config.stream_names
        stores = dict(checkpoint_stores or {})
        unknown = sorted(set(stores) - set(names))
        if unknown:
            raise ConfigError(f"checkpoint_stores names {unknown}, which are not in stream_name ({config.stream_name})")
        self.config = config
        self._spouts: dict[str, KinesisSpout] = {
            name: KinesisSpout(config.for_stream(name).replace(metrics_port=None), stores.get(name), client=client)
            for name in names}
        self._lock = threading.Lock()
        self._turn = 0
        self._unknown = 0
        self._metrics_server: Any = None

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def open(self) -> MultiStreamSpout:
        """Open each stream's spout (see ``KinesisSpout.open``); on an error, close those opened and raise it."""
        opened: list[KinesisSpout] = []
        try:
            for spout in self._spouts.values():
                spout.open()
                opened.append(spout)
            if self.config.metrics.port is not None and self._metrics_server is None:
                from kinesis_spout.metrics.server import start_metrics_server

                self._metrics_server = start_metrics_server(self.config.metrics.port, self)
        except BaseException:
            for spout in opened:
                spout.close()
            raise
        log.info("spout %s opened streams %s", self.config.app_name, ", ".join(self._spouts))
        return self

    def close(self) -> None:
        """Close every stream's spout (each flushes its last safe checkpoints). Idempotent."""
        server, self._metrics_server = self._metrics_server, None
        try:
            for spout in self._spouts.values():
                spout.close()
        finally:
            if server is not None:
                server.close()

    def __enter__(self) -> MultiStreamSpout:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- the streams ---------------------------------------------------------------------------------------------
    def spout(self, stream: str) -> KinesisSpout:
        """The spout of one stream (its ids have no stream prefix). ``ConfigError`` for a stream not read."""
        try:
            return self._spouts[stream]
        except KeyError:
            raise ConfigError(f"stream {stream!r} is not read by this spout ({self.config.stream_name})") from None

    def by_stream(self, mids: Iterable[str | SpoutTuple]) -> dict[str, list[Any]]:
        """``mids`` (ids or tuples of this spout) grouped by stream, without the stream prefix; ids of no stream
        read here are counted in :attr:`unknown_message_ids` and left out."""
        out: dict[str, list[Any]] = {}
        for mid in mids:
            text = mid.message_id if isinstance(mid, SpoutTuple) else mid
            stream, inner = split_message_id(text) if isinstance(text, str) else ("", "")
            if stream not in self._spouts:
                with self._lock:
                    self._unknown += 1
                continue
            out.setdefault(stream, []).append(
                SpoutTuple(inner, mid.record, mid.values, mid.attempt) if isinstance(mid, SpoutTuple) else inner)
        return out

    def _in_turn(self) -> Iterator[tuple[str, KinesisSpout]]:
        with self._lock:
            start = self._turn
            self._turn = (start + 1) % len(self._spouts)
        items = list(self._spouts.items())
        return iter(items[start:] + items[:start])

    # -- emitting ------------------------------------------------------------------------------------------------
    def next_tuple(self) -> SpoutTuple | None:
        """The next tuple of any stream (the streams take turns), or None at once when none is ready."""
        for stream, spout in self._in_turn():
            t = spout.next_tuple()
            if t is not None:
                return _outer(stream, t)
        return None

    def next_batch(self, max_records: int = 500, timeout_s: float = 1.0,
                   max_bytes: int | None = None) -> MultiStreamBatch:
        """Up to ``max_records`` tuples (and about ``max_bytes``) of the streams, which take turns being asked
        first; waits up to ``timeout_s`` for the first one (see ``KinesisSpout.next_batch``)."""
        batch = MultiStreamBatch(self)
        if max_records < 1:
            return batch
        deadline = time.monotonic() + timeout_s
        while True:
            used = 0
            for stream, spout in self._in_turn():
                room = max_records - len(batch)
                if room < 1 or (max_bytes is not None and used >= max_bytes):
                    break
                part = spout.next_batch(room, 0.0, None if max_bytes is None else max_bytes - used)
                used += sum(t.record.size for t in part)
                batch.add(stream, part)
            left = deadline - time.monotonic()
            if batch or left <= 0:
                return batch
            stream, spout = next(self._in_turn())  # nothing ready: wait a little on one stream, then ask all
            batch.add(stream, spout.next_batch(max_records, min(left, WAIT_SLICE_S), max_bytes))
            if batch:
                return batch

    def next_columns(self, *args: Any, **kwargs: Any) -> Any:
        """Not offered over several streams: read each stream's columns with ``spout(stream).next_columns()``."""
        raise ConfigError("next_columns reads one stream: use spout(stream).next_columns() for each stream, or "
                          "next_batch() over all of them")

    # -- ack / fail ----------------------------------------------------------------------------------------------
    def ack(self, mid: str | SpoutTuple) -> None:
        """``KinesisSpout.ack`` on the tuple's stream."""
        self.ack_many((mid,))

    def fail(self, mid: str | SpoutTuple) -> None:
        """``KinesisSpout.fail`` on the tuple's stream."""
        self.fail_many((mid,))

    def ack_many(self, mids: Iterable[str | SpoutTuple]) -> None:
        """``KinesisSpout.ack_many``, stream by stream."""
        for stream, inner in self.by_stream(mids).items():
            self._spouts[stream].ack_many(inner)

    def fail_many(self, mids: Iterable[str | SpoutTuple]) -> None:
        """``KinesisSpout.fail_many``, stream by stream."""
        for stream, inner in self.by_stream(mids).items():
            self._spouts[stream].fail_many(inner)

    # -- observability -------------------------------------------------------------------------------------------
    def metrics(self) -> list[ShardMetrics]:
        """Each stream's ``metrics()``, each shard's figures carrying its ``stream_name`` (the Prometheus label)."""
        return [dataclasses.replace(m, stream_name=stream)
                for stream, spout in self._spouts.items() for m in spout.metrics()]

    @property
    def shard_ids(self) -> list[str]:
        """The shards read now, as ``"{stream}/{shard_id}"``."""
        return [f"{stream}/{s}" for stream, spout in self._spouts.items() for s in spout.shard_ids]

    def lease_epochs(self) -> dict[str, int]:
        """``KinesisSpout.lease_epochs`` of each stream, keyed ``"{stream}/{shard_id}"``."""
        return {f"{stream}/{s}": e for stream, spout in self._spouts.items() for s, e in spout.lease_epochs().items()}

    def lagging_shards(self) -> list[str]:
        """``KinesisSpout.lagging_shards`` of each stream, as ``"{stream}/{shard_id}"``."""
        return [f"{stream}/{s}" for stream, spout in self._spouts.items() for s in spout.lagging_shards()]

    def caught_up(self) -> bool:
        """True once every stream's spout is caught up (see ``KinesisSpout.caught_up``)."""
        return not self.lagging_shards()

    def flush_checkpoints(self, timeout_s: float = 10.0) -> bool:
        """``KinesisSpout.flush_checkpoints`` of each stream within ``timeout_s`` in all; True when all were written."""
        deadline = time.monotonic() + timeout_s
        done = True
        for spout in self._spouts.values():
            done = spout.flush_checkpoints(max(0.0, deadline - time.monotonic())) and done
        return done

    def _sum(self, name: str) -> int:
        return sum(int(getattr(spout, name)) for spout in self._spouts.values())

    def _first(self, name: str) -> Any:
        return next((e for e in (getattr(s, name) for s in self._spouts.values()) if e is not None), None)

    @property
    def unknown_message_ids(self) -> int:
        """Acks and fails ignored: ids of no stream read here, and those each stream's spout ignored."""
        return self._unknown + self._sum("unknown_message_ids")

    @property
    def poison_records(self) -> int:
        return self._sum("poison_records")

    @property
    def dead_letter_failures(self) -> int:
        return self._sum("dead_letter_failures")

    @property
    def dead_letter_errors(self) -> BaseException | None:
        return self._first("dead_letter_errors")

    @property
    def checkpoint_errors(self) -> SpoutError | None:
        return self._first("checkpoint_errors")

    @property
    def checkpoint_writes(self) -> int:
        return self._sum("checkpoint_writes")

    @property
    def checkpoint_write_failures(self) -> int:
        return self._sum("checkpoint_write_failures")

    @property
    def checkpoint_conflicts(self) -> int:
        return self._sum("checkpoint_conflicts")

    @property
    def metrics_server(self) -> Any:
        """The Prometheus server started for ``config.metrics_port``, or None."""
        return self._metrics_server
