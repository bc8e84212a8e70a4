"""Per-spout AWS credentials against a moto server that checks them: signatures, IAM policies, AssumeRole.

moto authenticates every request once ``INITIAL_NO_AUTH_ACTION_COUNT`` requests were served without it, so the
module's server is its own (the session's moto server stays open to everyone). The first requests make the
identities; from then on the process environment's dummy keys are refused, and only the identities below get in:

- ``direct``: a user allowed ``kinesis:*``;
- ``assumer``: a user allowed ``sts:AssumeRole`` only (its own keys cannot read Kinesis);
- ``role/kinesis-reader``: a role allowed ``kinesis:*``, which ``assumer`` may assume with external id
  ``reader-ext-1``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from urllib.request import urlopen

import boto3
import pytest

from kinesis_spout import AwsCredentials, ConfigError, InitialPosition, KinesisError, KinesisSpout, SpoutConfig
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.deadletters import KinesisDeadLetters, record_from_envelope
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.testing.process import ServerProcess, free_port
from kinesis_spout.testing.spout import drain

ACCOUNT = "123456789012"
EXTERNAL_ID = "reader-ext-1"
RECORDS = [f"record {i}".encode() for i in range(20)]
SETUP_CALLS = 13  # the requests of make_identities(), served before authentication starts


@dataclass
class AuthedMoto:
    endpoint_url: str
    stream: str
    direct: tuple[str, str]
    assumer: tuple[str, str]
    role_arn: str


def make_identities(url: str) -> AuthedMoto:
    dummy = dict(endpoint_url=url, region_name="us-east-1", aws_access_key_id="AKIADUMMYDUMMYDUMMY0",
                 aws_secret_access_key="dummy")
    iam = boto3.client("iam", **dummy)

    def policy(name: str, action: str) -> str:
        doc = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": action, "Resource": "*"}]}
        arn: str = iam.create_policy(PolicyName=name, PolicyDocument=json.dumps(doc))["Policy"]["Arn"]
        return arn

    def user(name: str, policy_arn: str) -> tuple[str, str]:
        iam.create_user(UserName=name)
        iam.attach_user_policy(UserName=name, PolicyArn=policy_arn)
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    kinesis_all = policy("kinesis-all", "kinesis:*")  # 1
    direct = user("direct", kinesis_all)  # 2-4
    assumer = user("assumer", policy("assume-only", "sts:AssumeRole"))  # 5-8
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/assumer"}, "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"sts:ExternalId": EXTERNAL_ID}}}]}
    role_arn = iam.create_role(RoleName="kinesis-reader", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.attach_role_policy(RoleName="kinesis-reader", PolicyArn=kinesis_all)  # 9-10
    kinesis = boto3.client("kinesis", **dummy)
    kinesis.create_stream(StreamName="secured", ShardCount=2)  # 11
    kinesis.put_records(StreamName="secured", Records=[{"Data": d, "PartitionKey": str(i)}
                                                         for i, d in enumerate(RECORDS)])  # 12
    kinesis.create_stream(StreamName="secured-dlq", ShardCount=1)  # 13
    return AuthedMoto(url, "secured", direct, assumer, role_arn)


@pytest.fixture(scope="module")
def authed_moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthedMoto]:
    port = free_port()
    server = ServerProcess("moto (authenticated)", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                                                    str(port)],
                           tmp_path_factory.mktemp("moto-auth") / "moto.log",
                           env={"INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_CALLS)})
    server.start()
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            with urlopen(f"{url}/moto-api/", timeout=1):
                return True
        except OSError:
            return False

    try:
        server.wait_ready(up, 30)
        yield make_identities(url)
    finally:
        server.stop()


def config(moto: AuthedMoto, credentials: AwsCredentials | None, app: str) -> SpoutConfig:
    return SpoutConfig(stream_name=moto.stream, app_name=app, endpoint_url=moto.endpoint_url, region="us-east-1",
                       initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2,
                       credentials=credentials)


def read_all(cfg: SpoutConfig) -> set[bytes]:
    with KinesisSpout(cfg, MemoryCheckpointStore()) as spout:
        return {t.record.data for t in drain(spout, len(RECORDS))}


def open_error(cfg: SpoutConfig) -> str:
    with pytest.raises(KinesisError) as err:
        read_all(cfg)
    return str(err.value)


def test_the_server_refuses_the_default_chain_so_the_tests_below_prove_something(
        authed_moto: AuthedMoto, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIADUMMYDUMMYDUMMY0")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dummy")
    text = open_error(config(authed_moto, None, "default-chain"))
    assert "check the AWS credentials" in text and "awsProfile" in text


def test_static_keys_sign_the_spouts_calls(authed_moto: AuthedMoto) -> None:
    key, secret = authed_moto.direct
    assert read_all(config(authed_moto, AwsCredentials(access_key_id=key, secret_access_key=secret),
                           "static")) == set(RECORDS)


def test_kinesis_dead_letters_use_the_spouts_credentials(authed_moto: AuthedMoto) -> None:
    key, secret = authed_moto.direct
    creds = AwsCredentials(access_key_id=key, secret_access_key=secret)
    cfg = dataclasses.replace(config(authed_moto, creds, "dead-letters"), retry_limit=0,
                              dead_letter=KinesisDeadLetters("secured-dlq"))
    with KinesisSpout(cfg, MemoryCheckpointStore()) as spout:
        got = drain(spout, 1, ack=False)
        spout.fail(got[0].message_id)
        assert spout.flush_checkpoints(), "the dead letter was not written"
    client = make_client("us-east-1", authed_moto.endpoint_url, credentials=creds)
    shard = client.list_shards(StreamName="secured-dlq")["Shards"][0]["ShardId"]
    iterator = client.get_shard_iterator(StreamName="secured-dlq", ShardId=shard,
                                         ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    letters = client.get_records(ShardIterator=iterator)["Records"]
    assert [record_from_envelope(r["Data"])[1].data for r in letters] == [got[0].record.data]


def test_a_wrong_secret_is_refused_with_a_hint_and_never_shown(authed_moto: AuthedMoto) -> None:
    key, _ = authed_moto.direct
    wrong = "Wrong/Secret+Value0000000000000000000000"
    creds = AwsCredentials(access_key_id=key, secret_access_key=wrong)
    text = open_error(config(authed_moto, creds, "wrong-secret"))
    assert "check the AWS credentials" in text
    assert wrong not in text
    assert wrong not in repr(creds) and wrong not in repr(config(authed_moto, creds, "wrong-secret"))


def test_a_profile_of_the_shared_files_names_the_keys(authed_moto: AuthedMoto, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    key, secret = authed_moto.direct
    shared = tmp_path / "credentials"
    shared.write_text(f"[kinesis-reader]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(shared))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    assert read_all(config(authed_moto, AwsCredentials(profile="kinesis-reader"), "profile")) == set(RECORDS)
    with pytest.raises(ConfigError, match="AWS profile 'no-such-profile' is not in the shared AWS"):
        read_all(config(authed_moto, AwsCredentials(profile="no-such-profile"), "no-profile"))


def test_a_role_is_assumed_with_its_external_id(authed_moto: AuthedMoto) -> None:
    key, secret = authed_moto.assumer
    own = AwsCredentials(access_key_id=key, secret_access_key=secret)
    assert "not authorized" in open_error(config(authed_moto, own, "assumer-alone"))  # its own keys cannot read
    role = AwsCredentials(access_key_id=key, secret_access_key=secret, role_arn=authed_moto.role_arn,
                          role_session_name="spout-test", external_id=EXTERNAL_ID,
                          sts_endpoint_url=authed_moto.endpoint_url)
    assert read_all(config(authed_moto, role, "role")) == set(RECORDS)
    wrong = AwsCredentials(access_key_id=key, secret_access_key=secret, role_arn=authed_moto.role_arn,
                           external_id="not-the-id", sts_endpoint_url=authed_moto.endpoint_url)
    text = open_error(config(authed_moto, wrong, "wrong-external-id"))
    assert "AssumeRole" in text or "AccessDenied" in text
    assert "not-the-id" not in repr(wrong)


@pytest.mark.parametrize("read_mode", ["driver", "executors"])
def test_spark_source_options_carry_the_credentials_to_where_records_are_read(
        authed_moto: AuthedMoto, spark: Any, zookeeper: Any, tmp_path: Path, read_mode: str) -> None:
    from kinesis_spout.spark.source import KinesisSpoutDataSource

    spark.dataSource.register(KinesisSpoutDataSource)
    key, secret = authed_moto.assumer
    rows: list[Any] = []
    df = (spark.readStream.format("kinesis_spout")
          .option("streamName", authed_moto.stream).option("appName", f"spark-role-{read_mode}")
          .option("readMode", read_mode).option("zookeeperPrefix", zookeeper.prefix)
          .option("endpointUrl", authed_moto.endpoint_url).option("region", "us-east-1")
          .option("zookeeper", zookeeper.hosts).option("initialPosition", "TRIM_HORIZON")
          .option("awsAccessKeyId", key).option("awsSecretAccessKey", secret)
          .option("awsRoleArn", authed_moto.role_arn).option("awsExternalId", EXTERNAL_ID)
          .option("awsStsEndpointUrl", authed_moto.endpoint_url).load())
    query = (df.writeStream.trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "cp"))
             .foreachBatch(lambda df, _: rows.extend(df.select("data").collect())).start())
    query.awaitTermination(120)
    assert query.exception() is None
    plan = query._jsq.explainInternal(True)  # what the Spark UI shows of the query
    assert "kinesis" in plan.lower() and secret not in plan and EXTERNAL_ID not in plan
    assert {bytes(r["data"]) for r in rows} == set(RECORDS)
