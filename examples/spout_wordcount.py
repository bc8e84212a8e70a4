"""Storm's streaming word count with the plain spout (no Spark): read, split, count, ack.

Run against the demo's servers or your own:

    python examples/spout_wordcount.py --stream sentences --zookeeper 127.0.0.1:2181 \
        --endpoint-url http://127.0.0.1:4566 --seconds 30

Stop it any time with Ctrl-C: the checkpoints are flushed, and the next run resumes after them.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from kinesis_spout import InitialPosition, KinesisSpout, SpoutConfig, TextScheme


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stream", default="sentences")
    parser.add_argument("--app", default="wordcount-example")
    parser.add_argument("--zookeeper", default="127.0.0.1:2181")
    parser.add_argument("--endpoint-url", default=None, help="omit for AWS")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()

    config = SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=args.zookeeper,
                         endpoint_url=args.endpoint_url, region=args.region,
                         initial_position=InitialPosition.TRIM_HORIZON, scheme=TextScheme())
    counts: Counter[str] = Counter()
    deadline = time.monotonic() + args.seconds
    try:
        with KinesisSpout(config) as spout:
            while time.monotonic() < deadline:
                for tup in spout.next_batch(max_records=500, timeout_s=1.0):
                    _partition_key, sentence = tup.values
                    counts.update(sentence.split())
                    spout.ack(tup.message_id)
    except KeyboardInterrupt:
        pass
    for word, n in counts.most_common(10):
        print(f"{word:<12} {n}")


if __name__ == "__main__":
    main()
