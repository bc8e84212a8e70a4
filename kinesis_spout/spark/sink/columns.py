"""Which columns of a DataFrame the sink writes, checked against its schema on the driver before anything is put.

``data`` (binary, or string written as UTF-8) is required; the partition key comes from a string column
(``partitionKey``, or the one option ``partitionKeyColumn`` names) unless the option ``partitionKey`` gives one
constant key; ``explicitHashKey`` (a string column holding a decimal number) is optional. Other columns are ignored.
Column names match as Spark's do (case-insensitively when no column has the exact name).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kinesis_spout.errors import ConfigError
from kinesis_spout.spark.sink.options import SinkOptions

__all__ = ["Columns", "check_schema"]

_EXAMPLE = 'df.selectExpr("key AS partitionKey", "to_json(struct(*)) AS data")'


@dataclass(frozen=True)
class Columns:
    """The names of the columns written (as they are in the schema), and whether ``data`` is text."""

    data: str
    data_is_text: bool
    partition_key: str | None
    explicit_hash_key: str | None


def _find(fields: dict[str, Any], name: str) -> tuple[str, Any] | None:
    if name in fields:
        return name, fields[name]
    matches = [(n, t) for n, t in fields.items() if n.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None


def check_schema(schema: Any, options: SinkOptions) -> Columns:
    """The columns to write from ``schema`` (a Spark StructType); ConfigError naming the column, its type and the
    fix when one is missing or of the wrong type. Called by ``writer()``/``streamWriter()`` on the driver."""
    from pyspark.sql.types import BinaryType, StringType

    fields = {f.name: f.dataType for f in schema.fields}
    have = ", ".join(f"{n} {t.simpleString()}" for n, t in fields.items()) or "none"
    data = _find(fields, "data")
    if data is None:
        raise ConfigError(f"the kinesis_spout sink needs a column 'data' (binary or string) holding each record's "
                          f"data; the DataFrame has columns: {have}; e.g. {_EXAMPLE}")
    if not isinstance(data[1], (BinaryType, StringType)):
        raise ConfigError(f"column {data[0]!r} is {data[1].simpleString()}: the kinesis_spout sink writes binary or "
                          f"string data; cast it (CAST(data AS STRING)) or serialise it (to_json(struct(...)))")
    pk_name: str | None = None
    if options.partition_key is None:
        wanted = options.partition_key_column
        found = _find(fields, wanted)
        if found is None:
            raise ConfigError(f"the kinesis_spout sink needs a partition key column {wanted!r} (option "
                              f"partitionKeyColumn names another column; option partitionKey gives one key for every "
                              f"row); the DataFrame has columns: {have}")
        if not isinstance(found[1], StringType):
            raise ConfigError(f"partition key column {found[0]!r} is {found[1].simpleString()}: it must be a string; "
                              f"cast it (CAST({found[0]} AS STRING))")
        pk_name = found[0]
    ehk = _find(fields, options.explicit_hash_key_column)
    if ehk is not None and not isinstance(ehk[1], StringType):
        raise ConfigError(f"explicit hash key column {ehk[0]!r} is {ehk[1].simpleString()}: it must be a string "
                          f"holding a decimal number from 0 to 2**128 - 1")
    return Columns(data[0], isinstance(data[1], StringType), pk_name, ehk[0] if ehk is not None else None)
