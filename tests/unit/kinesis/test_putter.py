"""The shared PutRecords writer without a server: a stand-in for the boto3 client answers calls with chosen entries
refused (as Kinesis does), and the clock and sleep are the test's. Only refused entries are sent again, each accepted
entry is put once, nothing refused is reported written, and the retries stop at the policy's deadline."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from kinesis_spout.errors import PutRecordsError
from kinesis_spout.kinesis.writing.putter import (
    MAX_BYTES_PER_CALL,
    PutEntry,
    RecordPutter,
    chunks,
    entry_problem,
)
from kinesis_spout.retry import RetryPolicy

PTEE = "ProvisionedThroughputExceededException"


class FakeKinesis:
    """Answers each put_records call with the next script step: a set of refused indexes (with ``code``) or an
    exception to raise. Past the script every entry is accepted. Records accepted are kept in order."""

    def __init__(self, *steps: Any, code: str = PTEE) -> None:
        self.steps = list(steps)
        self.code = code
        self.sent: list[list[bytes]] = []
        self.stored: list[bytes] = []

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.sent.append([r["Data"] for r in Records])
        step = self.steps.pop(0) if self.steps else set()
        if isinstance(step, BaseException):
            raise step
        results: list[dict[str, Any]] = []
        for i, r in enumerate(Records):
            if i in step:
                results.append({"ErrorCode": self.code, "ErrorMessage": "refused"})
            else:
                self.stored.append(r["Data"])
                results.append({"ShardId": "shardId-000000000000", "SequenceNumber": str(len(self.stored))})
        return {"FailedRecordCount": len(step & set(range(len(Records)))), "Records": results}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.pauses.append(s)
        self.now += s


def items(n: int) -> list[tuple[int, PutEntry]]:
    return [(i, PutEntry(b"r%d" % i, f"pk-{i}")) for i in range(n)]


def putter(client: FakeKinesis, clock: Clock, policy: RetryPolicy, **kw: Any) -> RecordPutter[int]:
    return RecordPutter("out", client, policy, sleep=clock.sleep, clock=clock.clock, random=lambda: 0.5, **kw)


POLICY = RetryPolicy(initial_s=0.1, multiplier=2.0, max_s=1.0, jitter=1.0, deadline_s=30.0)


def test_only_refused_entries_are_sent_again_and_each_record_is_stored_once() -> None:
    client, clock = FakeKinesis({1, 3}, {1}), Clock()
    p = putter(client, clock, POLICY)
    landed = p.put(items(5))
    assert client.sent == [[b"r0", b"r1", b"r2", b"r3", b"r4"], [b"r1", b"r3"], [b"r3"]]
    assert sorted(client.stored) == sorted(b"r%d" % i for i in range(5)) and len(client.stored) == 5
    assert [x.item for x in landed] == [0, 2, 4, 1, 3]
    assert p.counters.snapshot() == {"records_put": 5, "records_retried": 3, "records_failed": 0, "throttled": 3,
                                     "bytes_put": sum(e.size for _, e in items(5)), "calls": 3}
    assert clock.pauses == [0.1 + 0.5 * 0.0, 0.1 + 0.5 * 0.1], "jittered delays between initial_s and the ceiling"


def test_entries_still_refused_at_the_deadline_are_reported_not_written_and_the_rest_written() -> None:
    client, clock = FakeKinesis(*[{0}] * 100), Clock()
    p = putter(client, clock, RetryPolicy(initial_s=1.0, multiplier=2.0, max_s=4.0, deadline_s=10.0))
    with pytest.raises(PutRecordsError, match=r"refused 1 records 4 times in 7\.0 s \(deadline 10 s\) \(Provision") \
            as raised:
        p.put(items(3))
    assert raised.value.written == (1, 2) and raised.value.refused == (0,)
    assert clock.pauses == [1.0, 2.0, 4.0], "no pause that would end past the deadline"
    assert p.counters.snapshot()["records_failed"] == 1
    assert client.stored == [b"r1", b"r2"]


def test_a_failed_chunk_stops_the_put_and_reports_later_chunks_not_written() -> None:
    client, clock = FakeKinesis(set(), set(range(500))), Clock()
    p = putter(client, clock, RetryPolicy(max_attempts=1))
    with pytest.raises(PutRecordsError) as raised:
        p.put(items(1200))
    assert raised.value.written == tuple(range(500))
    assert raised.value.refused == tuple(range(500, 1200))
    assert len(client.sent) == 2


def _throttled() -> ClientError:
    return ClientError({"Error": {"Code": PTEE, "Message": "Rate exceeded"},
                        "ResponseMetadata": {"HTTPStatusCode": 400}}, "PutRecords")


def test_a_throttled_call_is_tried_again_when_calls_are_retried_and_raised_at_once_otherwise() -> None:
    client, clock = FakeKinesis(_throttled(), _throttled()), Clock()
    p = putter(client, clock, POLICY)
    assert [x.item for x in p.put(items(2))] == [0, 1]
    assert len(client.sent) == 3 and p.counters.snapshot()["throttled"] == 4
    client, clock = FakeKinesis(_throttled()), Clock()
    once = putter(client, clock, POLICY, retry_calls=False)
    with pytest.raises(PutRecordsError, match="failed: .*throttled") as raised:
        once.put(items(2))
    assert raised.value.written == () and raised.value.refused == (0, 1)


def test_a_call_failing_with_an_error_that_cannot_pass_is_not_retried() -> None:
    bad = ClientError({"Error": {"Code": "ValidationException", "Message": "bad"},
                       "ResponseMetadata": {"HTTPStatusCode": 400}}, "PutRecords")
    client, clock = FakeKinesis(bad), Clock()
    with pytest.raises(PutRecordsError, match="ValidationException"):
        putter(client, clock, POLICY).put(items(2))
    assert len(client.sent) == 1 and clock.pauses == []


def test_calls_keep_within_500_records_and_5_mib() -> None:
    assert [len(c) for c in chunks(items(1201))] == [500, 500, 201]
    big = [(i, PutEntry(b"x" * (1 << 20 - 1), "k")) for i in range(12)]
    parts = chunks(big)
    assert all(sum(e.size for _, e in c) <= MAX_BYTES_PER_CALL for c in parts)
    assert [i for c in parts for i, _ in c] == list(range(12))


@pytest.mark.parametrize(("data", "pk", "ehk", "problem"), [
    (None, "k", None, "data is null"),
    ("text", "k", None, "not bytes"),
    (b"x", "", None, "partition key is null or empty"),
    (b"x", None, None, "partition key is null or empty"),
    (b"x", "k" * 257, None, "257 UTF-16 code units"),
    (b"x", "\U0001F600" * 129, None, "258 UTF-16 code units"),  # 129 code points: an emoji counts 2
    (b"x", "k", "12a", "not a decimal number"),
    (b"x", "k", str(2 ** 128), "not a decimal number"),
    (b"x" * (1 << 20), "k", None, "1048577 bytes"),
])
def test_records_kinesis_would_refuse_are_named_before_anything_is_put(data: Any, pk: Any, ehk: Any,
                                                                      problem: str) -> None:
    found = entry_problem(data, pk, ehk)
    assert found is not None and problem in found


def test_records_at_the_limits_are_accepted() -> None:
    assert entry_problem(b"x" * ((1 << 20) - 256), "k" * 256, str(2 ** 128 - 1)) is None
    assert entry_problem(b"", "k") is None
    assert entry_problem(b"x", "\U0001F600" * 128) is None


def _invalid(message: str, code: str = "ValidationException") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}},
                       "PutRecords")


def test_a_call_refused_as_a_whole_names_the_entries_kinesis_points_at_or_the_checks_find() -> None:
    named = _invalid("1 validation error detected: Value 'x' at 'records.2.member.explicitHashKey' failed")
    client, clock = FakeKinesis(named), Clock()
    p = putter(client, clock, POLICY, name=lambda row: f"row {row}")
    with pytest.raises(PutRecordsError, match=r"failed: .*\(ValidationException\); row 1 \(entry 1 of the call\): "
                                              r"the entry Kinesis names$") as raised:
        p.put(items(3))
    assert raised.value.retriable is False and raised.value.refused == (0, 1, 2)
    assert len(client.sent) == 1, "not tried again: the same call fails the same way"
    unnamed = _invalid("Partition key must be between 1 and 256 in length", code="InvalidArgumentException")
    client = FakeKinesis(unnamed)
    bad = [(n, PutEntry(b"x", "\U0001F600" * 129 if n in (4, 6) else "k")) for n in range(8)]
    with pytest.raises(PutRecordsError, match=r"; entry 4 of the call: its partition key has 258 UTF-16 code units .*"
                                              r"; entry 6 of the call: its partition key has 258 ") as raised:
        putter(client, clock, POLICY).put(bad)
    assert raised.value.retriable is False


def test_a_call_failing_for_a_passing_reason_names_no_entry() -> None:
    client, clock = FakeKinesis(_throttled()), Clock()
    with pytest.raises(PutRecordsError) as raised:
        putter(client, clock, POLICY, retry_calls=False, name=lambda row: f"row {row}").put(items(2))
    assert "row " not in str(raised.value) and raised.value.retriable
