"""The live producer: numbered records with unique ids put at a steady rate on a thread of its own.

Record ``n`` has the data ``"{n} k{n % KEYS}"`` (its number and its key, for the exact counts of the exactly-once
path) and the partition key ``p{n}``, which spreads the records over the shards. Puts go through the fault proxy,
so a throttling burst on ``PutRecords`` reaches the producer too: a refused call is retried with the same records
(the proxy answers it without forwarding, so nothing is placed twice).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from kinesis_spout.errors import KinesisError
from kinesis_spout.testing.kinesis import kinesis_client, put_records

KEYS = 16
log = logging.getLogger("soak.producer")


def key_of(n: int) -> str:
    """The exactly-once key of record ``n``."""
    return f"k{n % KEYS}"


class Producer:
    """Puts ``batch`` records every ``batch / rate`` seconds on stream ``stream`` at ``endpoint_url``.

    Who calls: a path (``start``, ``stop``) and the progress watch (``count``). ``placed`` maps each message id
    (``shard:sequence``) to its record number; it is written by the producer thread under ``lock`` and read by
    others under it (or after ``stop``). ``refused`` counts the put calls refused (and retried).
    """

    def __init__(self, endpoint_url: str, stream: str, rate: float = 100.0, batch: int = 20) -> None:
        self.endpoint_url = endpoint_url
        self.stream = stream
        self.rate = rate
        self.batch = batch
        self.lock = threading.Lock()
        self.placed: dict[str, int] = {}
        self.per_shard: Counter[str] = Counter()  # shard -> records placed on it (under lock)
        self.refused = 0
        self._next = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-producer", daemon=True)

    def start(self) -> "Producer":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop putting (the batch being put is finished) and join the thread."""
        self._stop.set()
        self._thread.join(60)

    def count(self) -> int:
        with self.lock:
            return len(self.placed)

    def produced(self) -> dict[str, int]:
        """A copy of message id -> record number."""
        with self.lock:
            return dict(self.placed)

    def shard_counts(self) -> dict[str, int]:
        """How many records were placed on each shard so far."""
        with self.lock:
            return dict(self.per_shard)

    def key_counts(self) -> Counter[str]:
        """How many records of each exactly-once key were placed."""
        with self.lock:
            return Counter(key_of(n) for n in self.placed.values())

    def _run(self) -> None:
        client: Any = kinesis_client(self.endpoint_url)
        pause = self.batch / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            numbers = list(range(self._next, self._next + self.batch))
            data = [f"{n} {key_of(n)}".encode() for n in numbers]
            try:
                placed = put_records(client, self.stream, data, partition_keys=[f"p{n}" for n in numbers])
            except (ClientError, BotoCoreError, KinesisError) as exc:
                self.refused += 1
                log.debug("put refused (%s); retrying the same records", exc)
                self._stop.wait(0.2)
                continue
            with self.lock:
                for n, (shard, seq) in zip(numbers, placed):
                    self.placed[f"{shard}:{seq}"] = n
                    self.per_shard[shard] += 1
            self._next += self.batch
            next_at += pause
            self._stop.wait(max(0.0, next_at - time.monotonic()))
