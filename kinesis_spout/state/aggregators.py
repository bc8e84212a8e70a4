"""Aggregators in Trident's two shapes, for ``persistent_aggregate``.

- A **combiner** (:class:`CombinerAggregator`): ``init(row)`` makes a value of one row, ``combine(a, b)`` merges
  two (associative and commutative), ``zero()`` is the value of nothing. Spark combines partially before the
  shuffle, and the batch's value of a key is combined with the stored one: ``combine(stored or zero(), partial)``.
- A **reducer** (:class:`ReducerAggregator`): ``init()`` starts a value, ``reduce(value, row)`` folds one row into
  it. No partial aggregation: each key's rows go to one task, folded into the stored value (or ``init()``).

:class:`Count` and :class:`Sum` are combiners that also name a Spark SQL aggregate (``spark_agg``), so Spark does
their partial aggregation in the JVM. Aggregators are picklable (they travel to executors). Pure.
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol, runtime_checkable

__all__ = ["CombineInto", "CombinerAggregator", "Count", "ReduceInto", "ReducerAggregator", "Sum"]


@runtime_checkable
class CombinerAggregator(Protocol):
    def init(self, row: Any) -> Any: ...

    def combine(self, a: Any, b: Any) -> Any: ...

    def zero(self) -> Any: ...


@runtime_checkable
class ReducerAggregator(Protocol):
    def init(self) -> Any: ...

    def reduce(self, value: Any, row: Any) -> Any: ...


class Count:
    """How many rows per key."""

    def init(self, row: Any) -> int:
        return 1

    def combine(self, a: Any, b: Any) -> int:
        return int(a) + int(b)

    def zero(self) -> int:
        return 0

    def spark_agg(self) -> Any:
        """The Spark SQL aggregate of a batch's partial values."""
        from pyspark.sql import functions as F

        return F.count(F.lit(1))

    def __repr__(self) -> str:
        return "Count()"


class Sum:
    """The sum of column ``field`` per key (nulls count as 0)."""

    def __init__(self, field: str) -> None:
        if not isinstance(field, str) or not field:
            raise ValueError(f"Sum needs the name of the column to add up, got {field!r}")
        self.field = field

    def init(self, row: Any) -> Any:
        value = row[self.field]
        return 0 if value is None else value

    def combine(self, a: Any, b: Any) -> Any:
        return a + b

    def zero(self) -> int:
        return 0

    def spark_agg(self) -> Any:
        from pyspark.sql import functions as F

        return F.coalesce(F.sum(F.col(self.field)), F.lit(0))

    def __repr__(self) -> str:
        return f"Sum({self.field!r})"


class CombineInto:
    """The updater persistent_aggregate gives a map state for one key: combines the batch's partial aggregate into
    the stored value (``zero()`` when none). Picklable; pure."""

    def __init__(self, aggregator: Any, partial: Any) -> None:
        self.aggregator = aggregator
        self.partial = partial

    def __call__(self, stored: Any) -> Any:
        return self.aggregator.combine(self.aggregator.zero() if stored is None else stored, self.partial)


class ReduceInto:
    """The updater persistent_aggregate gives a map state for one key with a reducer: reduces the batch's rows of
    the key into the stored value (``init()`` when none). Picklable; pure."""

    def __init__(self, aggregator: Any, rows: Iterable[Any]) -> None:
        self.aggregator = aggregator
        self.rows = rows

    def __call__(self, stored: Any) -> Any:
        value = self.aggregator.init() if stored is None else stored
        for row in self.rows:
            value = self.aggregator.reduce(value, row)
        return value
