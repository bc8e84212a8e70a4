"""What adaptive idle polling costs and saves: GetRecords calls/s per idle shard against the delay before a record
on a shard that wakes up, for each cap of ``max_empty_record_backoff_s`` (the pause after an empty read,
``empty_record_backoff_s``, doubles while a shard stays idle, up to the cap).

``python -m benchmarks.idle_polling --caps off,2,4,8`` runs, for each cap, a KinesisSpout on an idle ``--shards``
stream (kinesalite, defaults otherwise): after the shards' pauses reached the cap, the GetRecords calls of every
shard over ``--window`` seconds (calls/s per idle shard); then ``--rounds`` rounds in which each shard, idle at its
cap, gets one record at a random moment, and the time from the put's return to the spout handing the record out
(the wake-up delay: p50 and max). Prints one JSON line per cap. About three minutes for the default caps. Who calls:
a person choosing the default cap (docs/guides/spout.md says what was measured); nothing is written to
``results/``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from typing import Any

from benchmarks.context import BenchContext
from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.testing.kinesis import keys_on


def _warm_s(first: float, cap: float) -> float:
    """Seconds of empty reads until a shard's pause reaches ``cap`` (first, 2 x first, ... up to cap), plus one."""
    total, pause = 0.0, first
    while pause < cap:
        total, pause = total + pause, pause * 2
    return total + cap + 1.0


def run_cap(ctx: BenchContext, cap: float | None, shards: int, window_s: float, rounds: int) -> dict[str, Any]:
    """One cap's figures (see the module docstring)."""
    endpoint = ctx.endpoint("kinesalite")
    stream = endpoint.create_stream(endpoint.unique_stream_name("idle"), shards=shards)
    client = endpoint.client()
    shard_ids = sorted(s["ShardId"] for s in client.list_shards(StreamName=stream)["Shards"])
    keys = {s: keys_on(client, stream, s, 1)[0] for s in shard_ids}
    config = SpoutConfig(stream_name=stream, app_name=ctx.unique_app("idle"), endpoint_url=endpoint.endpoint_url,
                         region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON,
                         max_empty_record_backoff_s=cap)
    first = config.empty_record_backoff_s
    reach = _warm_s(first, cap or first)
    delivered: dict[str, float] = {}
    lock = threading.Lock()
    stop = threading.Event()
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        def consume() -> None:
            while not stop.is_set():
                for tup in spout.next_batch(max_records=100, timeout_s=0.05):
                    with lock:
                        delivered[tup.record.sequence_number] = time.monotonic()
                    spout.ack(tup.message_id)

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        time.sleep(reach)
        before = sum(m.getrecords_calls for m in spout.metrics())
        time.sleep(window_s)
        calls = sum(m.getrecords_calls for m in spout.metrics()) - before
        delays: list[float] = []
        for _ in range(rounds):
            # each shard gets its record at a random moment of its idle cycle, once it is back at the cap
            plan = sorted((reach + random.uniform(0, cap or first), s) for s in shard_ids)
            begun = time.monotonic()
            put_at: dict[str, float] = {}
            for at, shard in plan:
                time.sleep(max(0.0, begun + at - time.monotonic()))
                seq = client.put_record(StreamName=stream, Data=b"wake", PartitionKey=keys[shard])["SequenceNumber"]
                put_at[seq] = time.monotonic()
            deadline = time.monotonic() + 2 * (cap or first) + 10
            while time.monotonic() < deadline:
                with lock:
                    if all(seq in delivered for seq in put_at):
                        break
                time.sleep(0.05)
            with lock:
                delays += [max(0.0, delivered[seq] - t) for seq, t in put_at.items() if seq in delivered]
        stop.set()
        consumer.join(5)
    return {"cap_s": cap, "empty_record_backoff_s": first, "shards": shards,
            "getrecords_per_s_per_idle_shard": round(calls / window_s / shards, 3),
            "wake_delay_p50_s": round(statistics.median(delays), 2) if delays else None,
            "wake_delay_max_s": round(max(delays), 2) if delays else None,
            "wake_samples": len(delays)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.idle_polling", description=__doc__.split("\n\n")[0])
    p.add_argument("--caps", default="off,2,4,8", help="comma-separated caps in seconds, 'off' for none")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--window", type=float, default=12.0, help="seconds over which idle calls are counted")
    p.add_argument("--rounds", type=int, default=3, help="wake-ups per shard")
    args = p.parse_args(argv)
    ctx = BenchContext(quick=True)
    try:
        for raw in args.caps.split(","):
            cap = None if raw.strip().lower() == "off" else float(raw)
            print(json.dumps(run_cap(ctx, cap, args.shards, args.window, args.rounds)), flush=True)
    finally:
        ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
