"""Decoding SubscribeToShard event streams: real Kinesis's shape (an initial response first), kinesis-mock's shape
(no initial response), messages split across reads, shard ends, and exception messages."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone

import pytest

from kinesis_spout.errors import KinesisError, ThrottledError
from kinesis_spout.kinesis.retrieval.eventstream import EventStreamDecoder, parse_event
from kinesis_spout.kinesis.retrieval.fanout import starting_position
from kinesis_spout.positions import LATEST, TRIM_HORIZON, after, at_timestamp

from .eventstream_frames import INITIAL, encode, event

SEQ1 = "49680571496625077500013097732006182401233942320789848066"
SEQ2 = "49680571496625077500013097732012227030332015741541285890"


def records_event(*seqs: str, behind: int = 0) -> bytes:
    return event({"Records": [{"SequenceNumber": s, "Data": base64.b64encode(f"d{i}".encode()).decode(),
                               "PartitionKey": "k", "ApproximateArrivalTimestamp": 1795663618.98,
                               "EncryptionType": "NONE"} for i, s in enumerate(seqs)],
                  "ContinuationSequenceNumber": seqs[-1], "MillisBehindLatest": behind, "ChildShards": None})


@pytest.mark.parametrize("initial", [True, False], ids=["real-kinesis", "kinesis-mock"])
def test_a_stream_decodes_with_or_without_initial_response(initial: bool) -> None:
    stream = (INITIAL if initial else b"") + records_event(SEQ1, behind=1500) + records_event(SEQ2)
    decoder = EventStreamDecoder()
    events = decoder.feed(stream)
    assert [[r["SequenceNumber"] for r in e.records] for e in events] == [[SEQ1], [SEQ2]]
    first = events[0]
    assert first.records[0]["Data"] == b"d0"
    assert first.records[0]["ApproximateArrivalTimestamp"] == datetime.fromtimestamp(1795663618.98, timezone.utc)
    assert first.millis_behind_latest == 1500
    assert first.continuation == SEQ1
    assert not first.shard_end
    assert decoder.initial_response is initial


def test_messages_split_across_reads_are_kept_until_complete() -> None:
    stream = INITIAL + records_event(SEQ1) + records_event(SEQ2)
    decoder = EventStreamDecoder()
    seen = []
    for i in range(0, len(stream), 7):
        seen.extend(decoder.feed(stream[i:i + 7]))
    assert [e.continuation for e in seen] == [SEQ1, SEQ2]


def test_the_last_event_of_a_closed_shard_names_its_children() -> None:
    children = [{"ShardId": "shardId-000000000001", "ParentShards": ["shardId-000000000000"],
                 "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "9"}}]
    [last] = EventStreamDecoder().feed(event({"Records": [], "ContinuationSequenceNumber": None,
                                              "MillisBehindLatest": 0, "ChildShards": children}))
    assert last.shard_end
    assert last.child_shards == children
    assert last.records == []


def test_an_empty_event_is_not_a_shard_end() -> None:
    empty = parse_event(json.dumps({"Records": [], "ContinuationSequenceNumber": SEQ2, "MillisBehindLatest": 0,
                                    "ChildShards": None}).encode())
    assert not empty.shard_end and empty.continuation == SEQ2 and empty.child_shards is None


def test_resource_in_use_in_the_stream_is_retriable_and_says_why() -> None:
    message = encode({":message-type": "exception", ":exception-type": "ResourceInUseException"},
                     b'{"message":"Another active subscription exists for this consumer"}')
    with pytest.raises(KinesisError, match="another subscription of this consumer still reads the shard") as info:
        EventStreamDecoder().feed(INITIAL + message)
    assert info.value.retriable and info.value.code == "ResourceInUseException"


def test_access_denied_names_the_permission_and_the_fallback() -> None:
    message = encode({":message-type": "exception", ":exception-type": "AccessDeniedException"}, b'{"message":"no"}')
    with pytest.raises(KinesisError, match="kinesis:SubscribeToShard.*retrieval='polling'") as info:
        EventStreamDecoder().feed(message)
    assert not info.value.retriable


def test_throttling_in_the_stream_is_a_throttle() -> None:
    message = encode({":message-type": "exception", ":exception-type": "LimitExceededException"}, b'{"message":"x"}')
    with pytest.raises(ThrottledError):
        EventStreamDecoder().feed(message)


def test_a_payload_that_does_not_decode_is_a_retriable_error() -> None:
    broken = encode({":message-type": "event", ":event-type": "SubscribeToShardEvent"}, b"not json")
    with pytest.raises(KinesisError, match="does not decode") as info:
        EventStreamDecoder().feed(broken)
    assert info.value.retriable


def test_starting_positions_follow_the_polling_iterators() -> None:
    assert starting_position(TRIM_HORIZON) == {"Type": "TRIM_HORIZON"}
    assert starting_position(LATEST) == {"Type": "LATEST"}
    assert starting_position(after(SEQ1)) == {"Type": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": SEQ1}
    assert starting_position(after(SEQ1, 3)) == {"Type": "AT_SEQUENCE_NUMBER", "SequenceNumber": SEQ1}
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert starting_position(at_timestamp(when)) == {"Type": "AT_TIMESTAMP", "Timestamp": when}
