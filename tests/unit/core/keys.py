"""Keys for the tracker's tests: a real 56-digit Kinesis sequence number, keys after it with large gaps (as a
shard's are sparse), and random sparse runs of them."""

from __future__ import annotations

import random

from kinesis_spout.records import SequenceKey

# A real Kinesis sequence number (56 digits); the keys below are sparse, with large gaps.
BASE = 49590338271490256608559692538361571095921575989136588898
K0 = SequenceKey(BASE)
A = SequenceKey(BASE + 10**20 + 17)
B = SequenceKey(BASE + 3 * 10**21 + 5)
C = SequenceKey(BASE + 7 * 10**24 + 1)
D = SequenceKey(BASE + 9 * 10**25 + 3)


def sparse_keys(n: int, seed: int = 0, start: int = BASE) -> list[SequenceKey]:
    """``n`` increasing keys after ``start``, with random gaps of up to 10**30 (the same for the same seed)."""
    rng = random.Random(seed)
    keys, seq = [], start
    for _ in range(n):
        seq += rng.randint(1, 10**30)
        keys.append(SequenceKey(seq))
    return keys
