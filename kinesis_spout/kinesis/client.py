"""boto3 Kinesis clients, and the mapping of botocore errors onto the spout's error tree."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import botocore.session
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)

from kinesis_spout.config.groups import check_endpoint_url
from kinesis_spout.errors import KinesisError, StreamNotFoundError, ThrottledError
from kinesis_spout.kinesis import lean, lean_put
from kinesis_spout.kinesis.credentials import AwsCredentials, apply_credentials
from kinesis_spout.kinesis.error_text import error_message

THROTTLING_CODES = frozenset({
    "ProvisionedThroughputExceededException", "ThrottlingException", "LimitExceededException",
    "RequestLimitExceeded", "TooManyRequestsException", "SlowDown",
})
RETRIABLE_CODES = frozenset({
    "InternalFailure", "InternalServerError", "ServiceUnavailable", "ServiceUnavailableException",
    "KMSThrottlingException", "RequestTimeout", "RequestTimeoutException",
})
NOT_FOUND_CODES = frozenset({"ResourceNotFoundException"})
AUTH_CODES = frozenset({
    "AccessDeniedException", "AccessDenied", "UnrecognizedClientException", "InvalidSignatureException",
    "InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken", "ExpiredTokenException",
})
# ConnectionError covers endpoint, connect-timeout and proxy errors; HTTPClientError covers closed connections.
_TRANSIENT = (BotoConnectionError, HTTPClientError, ReadTimeoutError)


class EmulatorCredentialsMissing(NoCredentialsError):
    """No AWS credentials for a client of an explicit endpoint (an emulator, most often): :func:`translate` adds
    that any dummy keys do there. Raised by the hook :func:`make_client` installs, before a request is signed."""

    fmt = "Unable to locate credentials for the endpoint {endpoint_url}"


def _refuse_unsigned(endpoint_url: str) -> Any:
    """A ``before-sign`` hook raising :class:`EmulatorCredentialsMissing` (botocore would raise its bare
    ``NoCredentialsError`` a step later, naming no endpoint)."""
    def refuse(**_kwargs: Any) -> None:
        raise EmulatorCredentialsMissing(endpoint_url=endpoint_url)

    return refuse


def _fast_timestamp(value: Any) -> datetime:
    """Kinesis sends arrival timestamps as epoch seconds; botocore's generic parser costs ~60% of parse time."""
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, timezone.utc)
    from botocore.parsers import DEFAULT_TIMESTAMP_PARSER

    parsed: datetime = DEFAULT_TIMESTAMP_PARSER(value)
    return parsed


def make_client(region: str | None, endpoint_url: str | None, *, read_timeout_s: float = 30.0,
                credentials: AwsCredentials | None = None) -> Any:
    """A Kinesis client whose retries are left to the caller (botocore's own retries are off).

    ``credentials`` (optional) say where this client's AWS credentials come from; None: boto's default chain.
    An ``endpoint_url`` without http:// or https:// is a ``ConfigError`` naming the fix.
    Who calls: the spout on open(), the CLI and the benchmarks. The reader threads share one client (boto3
    clients are thread-safe).
    """
    if endpoint_url is not None:
        check_endpoint_url(endpoint_url)  # botocore's own refusal is a bare ValueError
    session = botocore.session.get_session()
    apply_credentials(session, credentials, region)
    if endpoint_url is not None and (credentials is None or credentials.is_default) \
            and session.get_credentials() is None:  # found ones are kept by the session: create_client reuses them
        unsigned = _refuse_unsigned(endpoint_url)
    else:
        unsigned = None
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=_fast_timestamp)
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=read_timeout_s,
                    max_pool_connections=256, user_agent_extra="kinesis-spout")
    client = session.create_client("kinesis", region_name=region or _default_region(session),
                                   endpoint_url=endpoint_url, config=config)
    if unsigned is not None:
        client.meta.events.register("before-sign.kinesis", unsigned)
    lean_put.enable(client)  # PutRecords of the writers: see kinesis_spout.kinesis.lean_put
    return lean.enable(client)  # GetRecords of the readers: see kinesis_spout.kinesis.lean


def asked(client: Any) -> str:
    """``"region us-east-1 at endpoint http://..."``: where a client sends its calls, for error messages."""
    return f"region {client.meta.region_name} at endpoint {client.meta.endpoint_url}"


def _default_region(session: Any) -> str:
    return session.get_config_variable("region") or "us-east-1"


def translate(exc: Exception, what: str) -> KinesisError:
    """Wrap a botocore error as the spout's error, with a message that says what was being done."""
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "Unknown")
        message = exc.response.get("Error", {}).get("Message", str(exc))
        if code in NOT_FOUND_CODES:
            return StreamNotFoundError(f"{what}: {message} ({code})", code=code)
        if code in THROTTLING_CODES:
            return ThrottledError(f"{what}: throttled ({code}): {message}", code=code)
        if code == "ExpiredIteratorException":
            return KinesisError(f"{what}: shard iterator expired", code=code, retriable=True)
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        retriable = code in RETRIABLE_CODES or status >= 500
        hint = ""
        if status in (401, 403) or code in AUTH_CODES:
            hint = ("; check the AWS credentials (SpoutConfig.credentials, options awsProfile / awsAccessKeyId / "
                    "awsRoleArn, or the default chain) and their IAM permissions for Kinesis")
        message = error_message(message, status)  # an HTML error page: its status and title
        return KinesisError(f"{what}: {message} ({code}){hint}", code=code, retriable=retriable)
    if isinstance(exc, EmulatorCredentialsMissing):
        return KinesisError(f"{what}: {exc}; an emulator (moto, kinesalite, kinesis-local, LocalStack) takes any "
                            f"keys: export AWS_ACCESS_KEY_ID=dummy AWS_SECRET_ACCESS_KEY=dummy (or give them: "
                            f"SpoutConfig.credentials, options awsAccessKeyId / awsSecretAccessKey); for AWS itself, "
                            f"configure real credentials (awsProfile, awsRoleArn, or the default chain)",
                            code="NoCredentialsError", retriable=False)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return KinesisError(f"{what}: {exc}; configure AWS credentials: SpoutConfig.credentials (options "
                            f"awsProfile / awsAccessKeyId / awsRoleArn), or the default chain (environment, shared "
                            f"files, instance role)", code=type(exc).__name__, retriable=False)
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):  # nothing answers there (yet)
        url = exc.kwargs.get("endpoint_url", "?")
        return KinesisError(f"{what}: cannot connect to Kinesis at {url} ({exc}): is it running and reachable there? "
                            f"The endpoint is the setting endpoint_url (KinesisSettings.endpoint_url, option "
                            f"'endpointUrl'; the examples and the kinesis-spout command read "
                            f"$KINESIS_SPOUT_ENDPOINT_URL); leave it unset for AWS", code=type(exc).__name__,
                            retriable=True)
    if isinstance(exc, BotoCoreError):
        # connection loss and time-outs may pass; anything else (bad parameters, no region...) will not
        retriable = isinstance(exc, _TRANSIENT)
        return KinesisError(f"{what}: {exc}", code=type(exc).__name__, retriable=retriable)
    return KinesisError(f"{what}: {exc!r}", retriable=False)
