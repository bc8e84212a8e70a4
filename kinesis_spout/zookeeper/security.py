"""How a ZooKeeper session authenticates, which ACL its nodes get, TLS, and the masking of secrets in kazoo's log.

kazoo logs through the ``kinesis_spout.kazoo`` logger (a session hands it to its client); at DEBUG kazoo logs the
auth request verbatim, so every secret a session registers (:func:`register_secret`) is blanked out of that
logger's records.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from kinesis_spout.config import SpoutConfig, ZooKeeperSettings

__all__ = ["ZooKeeperSecurity", "kazoo_log", "register_secret"]


class _RedactSecrets(logging.Filter):
    """Blanks registered secrets out of kazoo's log records. ``secrets`` only grows (a set add is atomic); it is
    read on whichever thread logs."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            redacted = message
            for secret in sorted(self.secrets, key=len, reverse=True):  # "user:password" whole before "password"
                redacted = redacted.replace(secret, "***")
            if redacted != message:
                record.msg, record.args = redacted, None
        return True


#: The logger every session gives its kazoo client.
kazoo_log = logging.getLogger("kinesis_spout.kazoo")
_redact = _RedactSecrets()
kazoo_log.addFilter(_redact)


def register_secret(secret: str) -> None:
    """Blank ``secret`` out of every later record of :data:`kazoo_log`. Called by a session before it connects."""
    if secret:
        _redact.secrets.add(secret)


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """How a session authenticates to ZooKeeper and who may change what it creates.

    ``auth`` is ``"user:password"`` for ZooKeeper's digest scheme: nodes the session creates then carry an ACL that
    gives that identity every right and, when ``world_readable``, everyone else read access (so tools can list
    checkpoints); nobody else can change them. Without ``auth`` nodes are open (ZooKeeper's default). ``tls``
    connects over TLS, verifying the server against ``ca_file`` (or the system's CAs) and presenting
    ``cert_file``/``key_file`` when the server wants a client certificate. ``auth`` never appears in a repr, a
    log line or an error.
    """

    auth: str | None = field(default=None, repr=False)
    world_readable: bool = True
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @classmethod
    def from_config(cls, config: SpoutConfig) -> "ZooKeeperSecurity":
        """The security of ``config``'s ZooKeeper settings (see :meth:`from_settings`)."""
        return cls.from_settings(config.zk)

    @classmethod
    def from_settings(cls, zk: ZooKeeperSettings) -> "ZooKeeperSecurity":
        """The auth, ACL and TLS part of ``zk``. Who calls: the ZooKeeper checkpoint store's constructors."""
        return cls(zk.auth, zk.world_readable, zk.tls, zk.tls_ca_file, zk.tls_cert_file, zk.tls_key_file)

    @property
    def user(self) -> str | None:
        return self.auth.partition(":")[0] if self.auth else None

    def register_secrets(self) -> None:
        """Mask the credentials (whole, and the password alone) in kazoo's log. Called by a session's start."""
        if self.auth:
            register_secret(self.auth)
            register_secret(self.auth.partition(":")[2])

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``KazooClient``: auth data, default ACL, TLS files."""
        from kazoo.security import OPEN_ACL_UNSAFE, make_acl, make_digest_acl

        kwargs: dict[str, Any] = {}
        if self.auth:
            user, _, password = self.auth.partition(":")
            kwargs["auth_data"] = [("digest", self.auth)]
            acl = [make_digest_acl(user, password, all=True)]
            if self.world_readable:
                acl.append(make_acl("world", "anyone", read=True))
            kwargs["default_acl"] = acl
        else:
            kwargs["default_acl"] = OPEN_ACL_UNSAFE
        if self.tls:
            kwargs.update(use_ssl=True, verify_certs=True, ca=self.ca_file, certfile=self.cert_file,
                          keyfile=self.key_file)
        return kwargs
