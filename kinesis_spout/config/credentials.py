"""AwsCredentials: where one spout's (or one Spark source's) Kinesis clients get their AWS credentials.

A plain value of the configuration (``SpoutConfig.credentials``): PURE, no boto3 here;
:func:`kinesis_spout.kinesis.credentials.apply_credentials` makes a botocore session sign with it.

Without it, boto's default chain decides (environment, shared files, container or instance role), the same for
every stream of the process. With it, each spout or source names its own: a profile of the shared files, static
keys, and/or an IAM role to assume (STS AssumeRole, refreshed before it expires, with an optional external id).
The keys of the source identity come from the profile, the static keys or the default chain, in that order.

Secrets never show: ``repr()`` leaves out the secret key, the session token and the external id, and errors never
quote them. The object is a frozen dataclass of strings: it pickles to Spark executors, each of which builds its
own clients (and assumes the role itself).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kinesis_spout.errors import ConfigError

__all__ = ["MAX_ROLE_DURATION_S", "MIN_ROLE_DURATION_S", "AwsCredentials"]

_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_SESSION_NAME = re.compile(r"^[\w+=,.@-]{2,64}$")
#: STS allows a role session from 15 minutes to 12 hours (the role's own maximum may be lower).
MIN_ROLE_DURATION_S, MAX_ROLE_DURATION_S = 900, 43_200


@dataclass(frozen=True)
class AwsCredentials:
    """Per-stream AWS credentials of a spout or a Spark source (``SpoutConfig.credentials``).

    - ``profile``: a profile of the shared AWS config and credentials files (``~/.aws/``, or where
      ``AWS_CONFIG_FILE`` / ``AWS_SHARED_CREDENTIALS_FILE`` say).
    - ``access_key_id`` + ``secret_access_key`` (+ ``session_token`` for temporary keys): static keys. They go
      together, and not with ``profile``.
    - ``role_arn``: a role to assume with the identity above (or the default chain's), as
      ``role_session_name`` (default ``kinesis-spout``), with ``external_id`` if the role's trust policy asks for
      one, for ``role_duration_s`` seconds; the session is renewed before it expires. ``sts_endpoint_url``
      sends the AssumeRole calls to another STS endpoint (a VPC endpoint, or a local test server).

    Every field is optional; an object with none set means the default chain.
    """

    profile: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    role_arn: str | None = None
    role_session_name: str | None = None
    external_id: str | None = field(default=None, repr=False)
    role_duration_s: int = 3600
    sts_endpoint_url: str | None = None

    def __post_init__(self) -> None:
        for name in ("profile", "access_key_id", "secret_access_key", "session_token", "role_arn",
                     "role_session_name", "external_id", "sts_endpoint_url"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                shown = "a value that is not shown" if name in _SECRET_FIELDS else repr(value)
                raise ConfigError(f"credentials.{name} must be a non-empty string or None, got {shown}")
        if (self.access_key_id is None) != (self.secret_access_key is None):
            given, missing = ("access_key_id", "secret_access_key") if self.access_key_id is not None \
                else ("secret_access_key", "access_key_id")
            raise ConfigError(f"credentials.{given} is set without credentials.{missing}: static AWS keys need "
                              f"both (and session_token for temporary keys)")
        if self.session_token is not None and self.access_key_id is None:
            raise ConfigError("credentials.session_token goes with access_key_id and secret_access_key (temporary "
                              "keys); set those too, or leave the token out")
        if self.profile is not None and self.access_key_id is not None:
            raise ConfigError("credentials.profile and static keys (access_key_id) are two sources of the same "
                              "identity: set one of them")
        if self.role_arn is None:
            for name in ("role_session_name", "external_id", "sts_endpoint_url"):
                if getattr(self, name) is not None:
                    raise ConfigError(f"credentials.{name} is only used to assume a role: set credentials.role_arn "
                                      f"too, or leave it out")
        elif not _ROLE_ARN.match(self.role_arn):
            raise ConfigError(f"credentials.role_arn must be an IAM role ARN such as "
                              f"arn:aws:iam::123456789012:role/kinesis-reader, got {self.role_arn!r}")
        if self.role_session_name is not None and not _SESSION_NAME.match(self.role_session_name):
            raise ConfigError(f"credentials.role_session_name must be 2 to 64 letters, digits or +=,.@_- "
                              f"(an STS role session name), got {self.role_session_name!r}")
        duration = self.role_duration_s
        if isinstance(duration, bool) or not isinstance(duration, int) or \
                not MIN_ROLE_DURATION_S <= duration <= MAX_ROLE_DURATION_S:
            raise ConfigError(f"credentials.role_duration_s must be a whole number of seconds from "
                              f"{MIN_ROLE_DURATION_S} to {MAX_ROLE_DURATION_S:,}, got {duration!r}")

    @property
    def is_default(self) -> bool:
        """True when nothing is set: boto's default chain decides."""
        return self == AwsCredentials()

    def describe(self) -> str:
        """Where the credentials come from, for logs (never a secret)."""
        source = f"profile {self.profile!r}" if self.profile else \
            f"static keys {self.access_key_id[:4]}..." if self.access_key_id else "the default AWS chain"
        if self.role_arn:
            return f"role {self.role_arn} assumed with {source}"
        return source


_SECRET_FIELDS = frozenset({"secret_access_key", "session_token", "external_id"})
