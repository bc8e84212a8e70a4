"""Taking records from a buffered shard reader under a byte budget: records are taken, oldest first, until their
bytes reach the budget (the one that reaches it included, the first always), and the rest stay buffered in order for
the next take. kinesalite through the fixture."""

from __future__ import annotations

import threading
import time

from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.polling import ShardGetter
from kinesis_spout.kinesis.retrieval.reader import BufferedShardReader
from kinesis_spout.positions import TRIM_HORIZON
from kinesis_spout.testing.kinesis import KinesisEndpoint

TIMEOUT_S = 10.0


def test_a_take_stops_at_the_record_whose_bytes_reach_the_budget_and_leaves_the_rest_in_order(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    datas = [b"x" * k for k in (10, 20, 30, 40, 50, 60)]  # sizes with the partition key "p": 11, 21, 31, 41, 51, 61
    placed = kinesalite.put(stream, datas, ["p"] * len(datas))
    client = make_client(kinesalite.region, kinesalite.endpoint_url, read_timeout_s=10.0)
    getter = ShardGetter(client, stream, placed[0][0], TRIM_HORIZON)
    signal = threading.Event()
    reader = BufferedShardReader(getter, max_records=100, max_bytes=1 << 20, empty_backoff_s=0.2, on_data=signal.set)
    reader.start()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while reader.buffered < len(datas):
            assert time.monotonic() < deadline, f"buffered {reader.buffered} of {len(datas)} records"
            signal.wait(0.2)
            signal.clear()
        sizes = [[r.size for r in reader.take_upto(n, budget)]
                 for n, budget in ((10, 31), (10, 1), (10, 41 + 51), (1, 1 << 30), (10, 0), (0, 1 << 30))]
        assert sizes == [[11, 21], [31], [41, 51], [61], [], []]
        assert reader.buffered == 0 and reader.take_upto(10, 1 << 30) == []
    finally:
        reader.close(5.0)
