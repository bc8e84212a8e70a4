"""Another Kinesis stream as dead-letter destination: one record per dead letter, holding its JSON envelope."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from kinesis_spout.deadletters.base import DeadLetter, DeadLetterError, envelope_bytes
from kinesis_spout.errors import ConfigError

if TYPE_CHECKING:
    from kinesis_spout.config import SpoutConfig
    from kinesis_spout.kinesis.credentials import AwsCredentials

__all__ = ["KinesisDeadLetters", "KinesisDeadLetterWriter", "MAX_ENVELOPE_BYTES"]

#: Kinesis takes records of at most 1 MiB (data plus partition key).
MAX_ENVELOPE_BYTES = 1 << 20
_MAX_PER_CALL = 500  # PutRecords: at most 500 records
_MAX_BYTES_PER_CALL = 5 << 20  # and 5 MiB per call


@dataclass(frozen=True)
class KinesisDeadLetters:
    """Dead letters put into the Kinesis stream ``stream_name``, one record per dead letter: its data is the JSON
    envelope (:func:`~kinesis_spout.deadletters.envelope`; the original data in base64), its partition key the
    original one. ``region``, ``endpoint_url`` and ``credentials`` (an :class:`~kinesis_spout.AwsCredentials`)
    default to the spout's own.

    Each dead letter is put once: a ``PutRecords`` entry that Kinesis refused (throttled, internal error) is put
    again, alone with the other refused ones, up to ``put_attempts`` times within one write; entries already
    accepted are never sent again. A write that still has refused entries (or whose call failed as a whole) is
    retried by the spout's dead-letter thread with backoff, the checkpoint waiting meanwhile. A duplicate can only
    come from a call whose answer was lost after Kinesis stored it, or from a crash before the checkpoint moved.
    """

    stream_name: str
    region: str | None = None
    endpoint_url: str | None = None
    put_attempts: int = 3
    credentials: AwsCredentials | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.stream_name, str) or not self.stream_name.strip():
            raise ConfigError(f"KinesisDeadLetters.stream_name must be a stream name, got {self.stream_name!r}")
        if isinstance(self.put_attempts, bool) or not isinstance(self.put_attempts, int) or \
                not 1 <= self.put_attempts <= 100:
            raise ConfigError(f"KinesisDeadLetters.put_attempts must be a whole number from 1 to 100, got "
                              f"{self.put_attempts!r}")

    def open_writer(self, config: SpoutConfig) -> "KinesisDeadLetterWriter":
        if self.stream_name == config.stream_name and (self.endpoint_url or config.endpoint_url) == \
                config.endpoint_url:
            raise ConfigError(f"the dead-letter stream {self.stream_name!r} is the stream the spout reads: its dead "
                              "letters would be read again as records; use another stream")
        return KinesisDeadLetterWriter(self.stream_name, self.region or config.region,
                                       self.endpoint_url or config.endpoint_url, self.put_attempts,
                                       credentials=self.credentials or config.credentials)


class KinesisDeadLetterWriter:
    """Puts envelopes with ``PutRecords`` (the client is made on the first write). One caller thread."""

    def __init__(self, stream_name: str, region: str | None, endpoint_url: str | None, put_attempts: int,
                 client: Any = None, credentials: AwsCredentials | None = None) -> None:
        self.stream_name = stream_name
        self.credentials = credentials
        self.region = region
        self.endpoint_url = endpoint_url
        self.put_attempts = put_attempts
        self._client = client
        self.puts = 0  # records accepted by Kinesis

    def write(self, letters: Sequence[DeadLetter]) -> None:
        entries = []
        for letter in letters:
            data = envelope_bytes(letter)
            key = letter.record.partition_key
            if len(data) + len(key.encode()) > MAX_ENVELOPE_BYTES:
                raise DeadLetterError(
                    f"the dead letter of {letter.record.message_id} is {len(data):,} bytes as a JSON envelope, over "
                    f"Kinesis' 1 MiB record limit: it cannot go to stream {self.stream_name!r}; use "
                    f"JsonLinesDeadLetters or a handler for records this large")
            entries.append((letter, {"Data": data, "PartitionKey": key}))
        written: list[DeadLetter] = []
        try:
            for chunk in _chunks(entries):
                written += self._put(chunk)
        except DeadLetterError as exc:
            raise DeadLetterError(str(exc), written=written + list(exc.written)) from exc.__cause__
        except Exception as exc:  # noqa: BLE001 - a failed call: wrapped, retried by the dead-letter thread
            raise DeadLetterError(f"putting dead letters into stream {self.stream_name!r} failed: {exc}",
                                  written=written) from exc

    def _put(self, chunk: list[tuple[DeadLetter, dict[str, Any]]]) -> list[DeadLetter]:
        """Put one PutRecords-sized chunk; refused entries are put again (alone) up to ``put_attempts`` times."""
        written: list[DeadLetter] = []
        todo = chunk
        for attempt in range(1, self.put_attempts + 1):
            try:
                reply = self._call([entry for _, entry in todo])
            except Exception as exc:
                raise DeadLetterError(f"{exc}", written=written) from exc
            refused = []
            codes = set()
            for (letter, entry), result in zip(todo, reply.get("Records", []), strict=True):
                if result.get("ErrorCode"):
                    refused.append((letter, entry))
                    codes.add(result["ErrorCode"])
                else:
                    written.append(letter)
            self.puts += len(todo) - len(refused)
            if not refused:
                return written
            todo = refused
            if attempt < self.put_attempts:
                time.sleep(0.05 * 2 ** (attempt - 1))
        raise DeadLetterError(f"stream {self.stream_name!r} refused {len(todo)} dead letters "
                              f"{self.put_attempts} times ({', '.join(sorted(codes))})", written=written)

    def _call(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        from kinesis_spout.kinesis.client import make_client, translate

        if self._client is None:
            self._client = make_client(self.region, self.endpoint_url, credentials=self.credentials)
        try:
            reply: dict[str, Any] = self._client.put_records(StreamName=self.stream_name, Records=records)
        except Exception as exc:
            raise translate(exc, f"PutRecords of {len(records)} dead letters into {self.stream_name!r}") from exc
        return reply

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()


def _chunks(entries: list[tuple[DeadLetter, dict[str, Any]]]) -> list[list[tuple[DeadLetter, dict[str, Any]]]]:
    """Split entries into PutRecords calls of at most 500 records and 5 MiB."""
    out: list[list[tuple[DeadLetter, dict[str, Any]]]] = []
    size = 0
    for item in entries:
        n = len(item[1]["Data"]) + len(item[1]["PartitionKey"].encode())
        if not out or len(out[-1]) >= _MAX_PER_CALL or size + n > _MAX_BYTES_PER_CALL:
            out.append([])
            size = 0
        out[-1].append(item)
        size += n
    return out
