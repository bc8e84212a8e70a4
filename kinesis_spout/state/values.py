"""What the exactly-once map states store with each value.

A :class:`TransactionalValue` is Trident's ``(value, txid)``: the txid of the last batch applied to the key. An
:class:`OpaqueValue` is ``(curr, prev, txid)``: the value after the batch ``txid`` and the value before it, so a
replay of ``txid`` (possibly with other records) recomputes from ``prev``. Pure value types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["OpaqueValue", "TransactionalValue"]


@dataclass(frozen=True)
class TransactionalValue:
    """The value of a key and the txid of the last batch applied to it."""

    txid: int
    val: Any


@dataclass(frozen=True)
class OpaqueValue:
    """The value after batch ``txid`` (``curr``) and the value before that batch (``prev``, None if none)."""

    txid: int
    curr: Any
    prev: Any = None

    def update(self, txid: int, updater: Callable[[Any], Any]) -> "OpaqueValue":
        """The value after applying ``updater`` for batch ``txid``.

        Same txid: the stored ``curr`` may hold an earlier attempt of this batch (which may have had other
        records), so the update is recomputed from ``prev``. A newer txid: ``curr`` becomes ``prev`` and the update
        applies to it. (A lower txid is refused by the map before it gets here.)
        """
        if txid == self.txid:
            return OpaqueValue(txid, updater(self.prev), self.prev)
        return OpaqueValue(txid, updater(self.curr), self.curr)
