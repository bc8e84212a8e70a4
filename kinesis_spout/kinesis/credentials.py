"""apply_credentials: a botocore session signs with the :class:`~kinesis_spout.config.credentials.AwsCredentials` of
one spout (or one Spark source); the value type itself is part of the configuration (re-exported here), and its
module says what each of its fields does and how its secrets are kept out of reprs and errors.
"""

from __future__ import annotations

import functools
from typing import Any

from kinesis_spout.config.credentials import AwsCredentials
from kinesis_spout.errors import ConfigError

__all__ = ["AwsCredentials", "apply_credentials"]


def apply_credentials(session: Any, credentials: AwsCredentials | None, region: str | None) -> None:
    """Make ``session`` (a fresh ``botocore.session.Session``) sign with ``credentials``.

    Called before the session creates its clients; does no I/O (a role is assumed on the first call that needs
    it, and again before the session expires). A profile that does not exist is a ``ConfigError`` here.
    """
    if credentials is None or credentials.is_default:
        return
    from botocore.credentials import CredentialProvider, CredentialResolver, DeferredRefreshableCredentials
    from botocore.exceptions import ProfileNotFound

    if credentials.profile is not None:
        session.set_config_variable("profile", credentials.profile)
        try:
            session.get_scoped_config()
        except ProfileNotFound:
            raise ConfigError(f"AWS profile {credentials.profile!r} is not in the shared AWS config or credentials "
                              f"files; add it (aws configure --profile {credentials.profile}) or set "
                              f"AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE to the files that have it") from None
    if credentials.role_arn is None:
        if credentials.access_key_id is not None:
            session.set_credentials(credentials.access_key_id, credentials.secret_access_key,
                                    credentials.session_token)
        return
    from botocore.credentials import AssumeRoleCredentialFetcher, Credentials

    if credentials.access_key_id is not None:
        source = Credentials(credentials.access_key_id, credentials.secret_access_key, credentials.session_token)
    else:
        source = session.get_credentials()
    if source is None:
        raise ConfigError(f"credentials.role_arn {credentials.role_arn} needs an identity to assume it with, and "
                          f"none was found: set a profile or static keys, or configure the default AWS chain")
    extra: dict[str, Any] = {"RoleSessionName": credentials.role_session_name or "kinesis-spout",
                             "DurationSeconds": credentials.role_duration_s}
    if credentials.external_id is not None:
        extra["ExternalId"] = credentials.external_id
    creator = functools.partial(session.create_client,
                                region_name=region or session.get_config_variable("region") or "us-east-1",
                                endpoint_url=credentials.sts_endpoint_url)
    fetcher = AssumeRoleCredentialFetcher(creator, source, credentials.role_arn, extra_args=extra)
    assumed = DeferredRefreshableCredentials(refresh_using=fetcher.fetch_credentials, method="assume-role")

    class _Assumed(CredentialProvider):
        METHOD = "assume-role"
        CANONICAL_NAME = "custom-kinesis-spout-role"

        def load(self) -> Any:
            return assumed

    session.register_component("credential_provider", CredentialResolver(providers=[_Assumed()]))
