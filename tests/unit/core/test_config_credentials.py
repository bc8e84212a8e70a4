"""AwsCredentials without a server: what is refused (and how it is said), what never shows, what pickles."""

from __future__ import annotations

import pickle

import pytest

from kinesis_spout import AwsCredentials, ConfigError, SpoutConfig
from kinesis_spout.kinesis.client import make_client

ROLE = "arn:aws:iam::123456789012:role/kinesis-reader"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize("kwargs, message", [
    (dict(access_key_id="AKIAEXAMPLE"), "access_key_id is set without credentials.secret_access_key"),
    (dict(secret_access_key=SECRET), "secret_access_key is set without credentials.access_key_id"),
    (dict(access_key_id="AKIAEXAMPLE", secret_access_key=SECRET, profile="p"), "set one of them"),
    (dict(session_token="t"), "session_token goes with access_key_id"),
    (dict(external_id="abc"), "only used to assume a role: set credentials.role_arn"),
    (dict(role_session_name="job"), "only used to assume a role"),
    (dict(role_arn="kinesis-reader"), "must be an IAM role ARN"),
    (dict(role_arn=ROLE, role_session_name="a b"), "role_session_name must be 2 to 64"),
    (dict(role_arn=ROLE, role_duration_s=60), "role_duration_s must be a whole number of seconds from 900"),
    (dict(profile=""), "credentials.profile must be a non-empty string"),
])
def test_incoherent_credentials_are_refused_saying_what_to_set(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AwsCredentials(**kwargs)  # type: ignore[arg-type]


def test_a_secret_of_the_wrong_type_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigError) as err:
        AwsCredentials(access_key_id="AKIAEXAMPLE", secret_access_key=12345)  # type: ignore[arg-type]
    assert "12345" not in str(err.value) and "not shown" in str(err.value)


def test_secrets_never_show_in_repr_or_in_the_description() -> None:
    creds = AwsCredentials(access_key_id="AKIAEXAMPLEEXAMPLE00", secret_access_key=SECRET, session_token="tok-123",
                           role_arn=ROLE, external_id="ext-456")
    config = SpoutConfig(stream_name="s", app_name="a", credentials=creds)
    for text in (repr(creds), repr(config), str(config), creds.describe()):
        assert SECRET not in text and "tok-123" not in text and "ext-456" not in text
    assert creds.describe() == f"role {ROLE} assumed with static keys AKIA..."
    assert AwsCredentials(profile="etl").describe() == "profile 'etl'"
    assert AwsCredentials().is_default and AwsCredentials().describe() == "the default AWS chain"


def test_credentials_pickle_whole_for_the_executors() -> None:
    creds = AwsCredentials(profile="etl", role_arn=ROLE, role_session_name="job-1", external_id="ext-456",
                           role_duration_s=7200, sts_endpoint_url="https://sts.eu-west-1.amazonaws.com")
    assert pickle.loads(pickle.dumps(creds)) == creds
    config = SpoutConfig(stream_name="s", app_name="a", credentials=creds)
    assert pickle.loads(pickle.dumps(config)).credentials == creds


def test_string_options_build_the_credentials_and_errors_name_the_options() -> None:
    config = SpoutConfig.from_options({"streamName": "s", "appName": "a", "awsProfile": "etl", "awsRoleArn": ROLE,
                                       "awsRoleSessionName": "job-1", "awsExternalId": "ext-456",
                                       "awsRoleDurationS": "7200"})
    assert config.credentials == AwsCredentials(profile="etl", role_arn=ROLE, role_session_name="job-1",
                                                external_id="ext-456", role_duration_s=7200)
    with pytest.raises(ConfigError, match="option 'awsSessionToken' goes with access_key_id"):
        SpoutConfig.from_options({"streamName": "s", "appName": "a", "awsSessionToken": "t"})
    with pytest.raises(ConfigError, match="option 'awsRoleDurationS' must be a whole number"):
        SpoutConfig.from_options({"streamName": "s", "appName": "a", "awsRoleArn": ROLE, "awsRoleDurationS": "1h"})
    assert SpoutConfig.from_options({"streamName": "s", "appName": "a"}).credentials is None


def test_a_config_refuses_credentials_that_are_not_an_aws_credentials() -> None:
    with pytest.raises(ConfigError, match="credentials must be a kinesis_spout.AwsCredentials"):
        SpoutConfig(stream_name="s", app_name="a", credentials={"profile": "etl"})  # type: ignore[arg-type]


def test_a_client_that_assumes_a_role_is_made_without_calling_sts() -> None:
    # the role is assumed on the first call that needs credentials: making the client does no I/O, even with an
    # STS endpoint nothing listens on
    creds = AwsCredentials(access_key_id="AKIAEXAMPLE", secret_access_key=SECRET, role_arn=ROLE,
                           sts_endpoint_url="http://127.0.0.1:9")
    client = make_client("eu-west-1", "http://127.0.0.1:9", credentials=creds)
    assert client.meta.region_name == "eu-west-1"
    client.close()
