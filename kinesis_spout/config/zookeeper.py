"""ZooKeeperSettings: the ZooKeeper ensemble that holds checkpoints and leases, and how to talk to it.

PURE: standard library and core modules only (a TLS file is only checked to exist). The sessions themselves are
made by the I/O layer from these settings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kinesis_spout.config.names import fail, require_bool, require_float, require_text

__all__ = ["ZooKeeperSettings"]


@dataclass(frozen=True)
class ZooKeeperSettings:
    """ZooKeeper (``SpoutConfig.zk``; flat keywords ``zookeeper``, ``zookeeper_prefix``, ``zookeeper_*``).

    - ``hosts``: the connect string (``host:port,host:port``); ``prefix``: the root path of this library's znodes.
    - ``session_timeout_s``: the session timeout asked for (the server bounds it); ``deadline_s``: if checkpoints
      cannot be written for this long, the spout raises ``CheckpointError``.
    - ``auth``: ``user:password`` for digest auth, never shown in ``repr()``, logs or errors;
      ``world_readable``: with auth, others may read (not change) the checkpoints.
    - ``tls``: connect over TLS; ``tls_ca_file``: PEM file of the CA that signed the server's certificate (None:
      the system's); ``tls_cert_file`` + ``tls_key_file``: a client certificate and its key, both or neither.
    """

    hosts: str = "127.0.0.1:2181"
    prefix: str = "/kinesis_spout"
    session_timeout_s: float = 10.0
    deadline_s: float = 60.0
    auth: str | None = field(default=None, repr=False)
    world_readable: bool = True
    tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    def __post_init__(self) -> None:
        require_text("zk", "hosts", self.hosts)
        prefix = self.prefix
        if not isinstance(prefix, str) or not prefix.startswith("/") or prefix.endswith("/") and prefix != "/":
            raise fail("zk", "prefix", f"must be an absolute path without a trailing '/', e.g. '/kinesis_spout', "
                                       f"got {prefix!r}")
        require_float("zk", "session_timeout_s", self.session_timeout_s, 1.0, 3600.0)
        require_float("zk", "deadline_s", self.deadline_s, 1.0, 86400.0)
        if self.auth is not None:
            user, sep, password = self.auth.partition(":") if isinstance(self.auth, str) else ("", "", "")
            if not sep or not user.strip() or not password:  # never echo the value: it holds a password
                raise fail("zk", "auth", "must be 'user:password' (ZooKeeper digest auth) with a non-empty user and "
                                         "password; the value given is not shown")
        require_bool("zk", "world_readable", self.world_readable)
        require_bool("zk", "tls", self.tls)
        for name in ("tls_ca_file", "tls_cert_file", "tls_key_file"):
            value = getattr(self, name)
            if value is None:
                continue
            if not self.tls:
                raise fail("zk", name, "is set but zookeeper_tls is False; set zookeeper_tls=True (ZooKeeperSettings"
                                       ".tls, option 'zookeeperTls') to use TLS")
            if not isinstance(value, str) or not os.path.isfile(value):
                raise fail("zk", name, f"must name a readable PEM file, got {value!r}")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise fail("zk", "tls_cert_file", "and zookeeper_tls_key_file go together (a client certificate and its "
                                              "key); set both or neither")

