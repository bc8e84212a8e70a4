"""Record schemes: how a Kinesis record becomes the values of a spout tuple (Storm's ``Scheme``).

A scheme is any callable ``scheme(record) -> tuple`` with a ``fields`` attribute naming the values. A scheme that
raises (``ValueError`` for data that does not decode, but any ``Exception`` counts: a ``RecursionError`` on deeply
nested JSON, a ``KeyError`` of a user's scheme) marks the record as a poison record: the spout hands it straight to
the dead-letter handler with the exception in the reason (retrying cannot fix a record that does not decode) and
moves on.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from kinesis_spout.records import Record


@runtime_checkable
class RecordScheme(Protocol):
    """Turns a record into tuple values; ``fields`` names them."""

    fields: tuple[str, ...]

    def __call__(self, record: Record) -> tuple[Any, ...]: ...


class RawScheme:
    """``(partition_key, data)`` with ``data`` as bytes. The default."""

    fields: tuple[str, ...] = ("partition_key", "data")

    def __call__(self, record: Record) -> tuple[Any, ...]:
        return (record.partition_key, record.data)

    def __repr__(self) -> str:
        return "RawScheme()"


class TextScheme:
    """``(partition_key, text)``: data decoded as text (UTF-8 by default); undecodable data is a poison record."""

    fields: tuple[str, ...] = ("partition_key", "text")

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def __call__(self, record: Record) -> tuple[Any, ...]:
        try:
            return (record.partition_key, record.data.decode(self.encoding))
        except UnicodeDecodeError as exc:
            raise ValueError(f"record {record.message_id} is not valid {self.encoding}: {exc}") from exc

    def __repr__(self) -> str:
        return f"TextScheme({self.encoding!r})"


class JsonScheme:
    """``(partition_key, value)``: data parsed as JSON; invalid JSON is a poison record."""

    fields: tuple[str, ...] = ("partition_key", "value")

    def __call__(self, record: Record) -> tuple[Any, ...]:
        try:
            return (record.partition_key, json.loads(record.data))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"record {record.message_id} is not valid JSON: {exc}") from exc

    def __repr__(self) -> str:
        return "JsonScheme()"


SCHEMES: dict[str, type] = {"raw": RawScheme, "text": TextScheme, "json": JsonScheme}
