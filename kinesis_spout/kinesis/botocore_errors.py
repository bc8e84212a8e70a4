"""The mapping of botocore errors onto the spout's error tree, shared by reading and writing.

:func:`translate` wraps a botocore error as a :class:`~kinesis_spout.errors.KinesisError` whose message says what
was being done, whether it is worth retrying, and for credentials and endpoints what to fix. Who calls: the getters,
shard listing, consumer registration, the putter and the Spark paths around their own Kinesis calls. Pure.
"""

from __future__ import annotations

from typing import Any

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

from kinesis_spout.errors import KinesisError, StreamNotFoundError, ThrottledError
from kinesis_spout.kinesis.error_text import error_message

__all__ = ["AUTH_CODES", "NOT_FOUND_CODES", "RETRIABLE_CODES", "THROTTLING_CODES", "EmulatorCredentialsMissing",
           "asked", "translate"]

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
    that any dummy keys do there. Raised by the hook :func:`~kinesis_spout.kinesis.client.make_client` installs,
    before a request is signed."""

    fmt = "Unable to locate credentials for the endpoint {endpoint_url}"


def where(region: str | None, endpoint_url: str | None) -> str:
    """``"region us-east-1 at endpoint http://..."`` (``"region us-east-1"`` without an endpoint; ``default`` for no
    region): where calls go, in the words of every error message that says it. Pure."""
    place = f"region {region or 'default'}"
    return f"{place} at endpoint {endpoint_url}" if endpoint_url else place


def asked(client: Any) -> str:
    """:func:`where` a client sends its calls."""
    return where(client.meta.region_name, client.meta.endpoint_url)


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
