"""KPL de-aggregation as columns (deaggregate_columns, what the shard getter reads with): the same user records as
deaggregate and as aws-kinesis-agg, for every shape of the shared cases and for aggregates where only some user
records carry an explicit hash key (before, after and between those without one: None for those without, as
deaggregate reads them); None where deaggregate answers None. No servers."""

from __future__ import annotations

import pytest

from kinesis_spout.kinesis.aggregation import MAGIC, UserRecord, deaggregate, deaggregate_columns

from .aggregates import CASES, aggregate, theirs

MIXED: dict[str, list[tuple[str, bytes, str | None]]] = {
    "explicit hash keys after plain ones": [("a", b"1", None), ("b", b"2", None), ("c", b"3", "42"), ("d", b"4", "7")],
    "explicit hash keys before plain ones": [("a", b"1", "42"), ("b", b"2", None), ("c", b"3", None)],
    "alternating": [(f"pk-{i}", bytes([i]) * 200, str(i) if i % 2 else None) for i in range(9)],
}


def as_users(blob: bytes) -> list[UserRecord] | None:
    columns = deaggregate_columns(blob)
    if columns is None:
        return None
    ehks = columns.explicit_hash_keys or [None] * len(columns.data)
    assert len(columns.partition_keys) == len(ehks) == len(columns.data)
    return [UserRecord(pk, ehk, data) for pk, ehk, data in zip(columns.partition_keys, ehks, columns.data)]


@pytest.mark.parametrize("case", sorted(CASES) + sorted(MIXED))
def test_columns_hold_the_user_records_deaggregate_and_aws_kinesis_agg_read(case: str) -> None:
    records = CASES.get(case) or MIXED[case]
    blob = aggregate(records)
    expected = [UserRecord(pk, ehk, data) for pk, data, ehk in records]
    assert as_users(blob) == deaggregate(blob) == expected
    # aws-kinesis-agg reads a user record without an explicit hash key index as the table's first entry (protobuf's
    # default 0) where there is a table: compared on what it reads the same, partition keys and data
    assert [(r.partition_key, r.data) for r in theirs(blob)] == [(pk, data) for pk, data, _ in records]
    columns = deaggregate_columns(blob)
    assert columns is not None
    assert (columns.explicit_hash_keys is None) == all(ehk is None for _, _, ehk in records)


@pytest.mark.parametrize("blob", [b"plain data", MAGIC + b"not an aggregate", MAGIC])
def test_what_is_not_an_aggregate_has_no_columns(blob: bytes) -> None:
    assert deaggregate_columns(blob) is None and deaggregate(blob) is None
