"""What the exactly-once map states store with each value.

A :class:`TransactionalValue` is Trident's ``(value, txid)``: the txid of the last batch applied to the key. An
:class:`OpaqueValue` is ``(curr, prev, txid)``: the value after the batch ``txid`` and the value before it, so a
replay of ``txid`` (possibly with other records) recomputes from ``prev``.

Both also carry who wrote the txid, so that a replay can be told from other writes of the same txid:

- ``run``: the identity of the run whose batch ``txid`` was (a readStream query's id, a pipeline's run id), or
  None when the writer knew none (and for values written before runs were stored);
- ``call`` and ``parts``: the write (one call of ``persistent_aggregate``/``partition_persist``) that last wrote
  the key, and the partitions of that write whose updates of the key it holds (None and () outside those calls).

Values compare equal by their txid and values alone (``run``, ``call`` and ``parts`` are bookkeeping, left out
of ``==`` and of the hash). Pure value types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["OpaqueValue", "TransactionalValue"]


@dataclass(frozen=True)
class TransactionalValue:
    """The value of a key and the txid (and run) of the last batch applied to it."""

    txid: int
    val: Any
    run: str | None = field(default=None, compare=False)
    call: str | None = field(default=None, compare=False)
    parts: tuple[int, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class OpaqueValue:
    """The value after batch ``txid`` (``curr``) and the value before that batch (``prev``, None if none)."""

    txid: int
    curr: Any
    prev: Any = None
    run: str | None = field(default=None, compare=False)
    call: str | None = field(default=None, compare=False)
    parts: tuple[int, ...] = field(default=(), compare=False)
