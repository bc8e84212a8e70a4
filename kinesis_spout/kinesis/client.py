"""boto3 Kinesis clients: botocore's retries off, the project's credentials, and the lean GetRecords and PutRecords
paths enabled. The mapping of botocore errors onto the spout's error tree is
:mod:`kinesis_spout.kinesis.botocore_errors`."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import botocore.session
from botocore.config import Config

from kinesis_spout.config.groups import KinesisSettings, check_endpoint_url
from kinesis_spout.kinesis.botocore_errors import EmulatorCredentialsMissing
from kinesis_spout.kinesis.credentials import AwsCredentials, apply_credentials
from kinesis_spout.kinesis.retrieval import lean
from kinesis_spout.kinesis.writing import lean_put


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
    lean_put.enable(client)  # PutRecords of the writers: see kinesis_spout.kinesis.writing.lean_put
    return lean.enable(client)  # GetRecords of the readers: see kinesis_spout.kinesis.retrieval.lean


def kinesis_client(kinesis: KinesisSettings, *, read_timeout_s: float = 30.0) -> Any:
    """:func:`make_client` for the stream of ``kinesis`` (region, endpoint, credentials). Who calls: the spout's
    ``open()``, the Spark source and sink, the Kinesis dead-letter destination."""
    return make_client(kinesis.region, kinesis.endpoint_url, read_timeout_s=read_timeout_s,
                       credentials=kinesis.credentials)


def _default_region(session: Any) -> str:
    return session.get_config_variable("region") or "us-east-1"
