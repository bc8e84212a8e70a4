"""The shard getter's hash-key filter over de-aggregated user records: a partition key and an explicit hash key
written with the same text route differently (the MD5 of the one, the number of the other), whichever of the two
comes first in an aggregate, and user records with and without an explicit hash key mix in one aggregate.
kinesalite through the fixtures."""

from __future__ import annotations

import hashlib
from typing import Any

from aws_kinesis_agg.aggregator import RecordAggregator

from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.polling import ShardGetter
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.positions import TRIM_HORIZON
from kinesis_spout.records import Record
from kinesis_spout.testing.kinesis import KinesisEndpoint

LOWER_HALF = HashKeyRange(0, (1 << 127) - 1)
TEXT = "5"  # as a partition key its MD5 lies in the upper half; as an explicit hash key it is the number 5


def aggregate(users: list[tuple[str, bytes, str | None]]) -> bytes:
    """One aggregate of ``(partition key, data, explicit hash key)`` user records, made by aws-kinesis-agg."""
    aggregator = RecordAggregator()
    for pk, data, ehk in users:
        assert aggregator.add_user_record(pk, data, ehk) is None
    return bytes(aggregator.clear_and_get().get_contents()[2])


def fetch_records(getter: ShardGetter, kinesis_records: int) -> list[Record]:
    """The user records of ``getter``'s replies until ``kinesis_records`` Kinesis records came (at most 20 calls)."""
    out: list[Record] = []
    seen = 0
    for _ in range(20):
        result = getter.fetch()
        out += result.records
        seen += result.fetched
        if seen >= kinesis_records:
            break
    return out


def client_of(endpoint: KinesisEndpoint) -> Any:
    return make_client(endpoint.region, endpoint.endpoint_url, read_timeout_s=10.0)


def test_a_partition_key_and_an_explicit_hash_key_of_the_same_text_are_routed_each_by_its_own_kind(
        kinesalite: KinesisEndpoint) -> None:
    assert int.from_bytes(hashlib.md5(TEXT.encode()).digest(), "big") > LOWER_HALF.end  # the premise
    by_md5 = (TEXT, b"routed by the MD5 of its partition key: upper half, dropped", None)
    by_number = ("other", b"routed by its explicit hash key 5: lower half, kept", TEXT)
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [aggregate([by_md5, by_number]), aggregate([by_number, by_md5])],
                            ["agg-1", "agg-2"])
    shard, seqs = placed[0][0], [seq for _, seq in placed]
    getter = ShardGetter(client_of(kinesalite), stream, shard, TRIM_HORIZON, deaggregate=True,
                         hash_range=LOWER_HALF)
    records = fetch_records(getter, 2)
    assert [(r.sequence_number, r.sub_sequence_number, r.partition_key, r.data, r.aggregated) for r in records] == [
        (seqs[0], 1, "other", by_number[1], 2), (seqs[1], 0, "other", by_number[1], 1)]
    assert getter.foreign_user_records == 2
