"""Throwaway TLS material for tests: a CA, a server certificate for 127.0.0.1 and a client certificate (PEM)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TlsFiles:
    """Paths of the PEM files :func:`make_tls_files` wrote."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    #: The server's key and certificate in one file (what ZooKeeper's PEM key store reads).
    server_bundle: Path
    client_cert: Path
    client_key: Path


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject_cn: str, key: Any, issuer_cn: str, issuer_key: Any, *, ca: bool, server: bool = False) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_cn)]))
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_tls_files(directory: Path) -> TlsFiles:
    """Write a fresh CA, a server certificate (localhost, 127.0.0.1) and a client certificate into ``directory``."""
    from cryptography.hazmat.primitives import serialization

    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = _cert("kinesis-spout test CA", ca_key, "kinesis-spout test CA", ca_key, ca=True)
    server_key = _key()
    server = _cert("127.0.0.1", server_key, "kinesis-spout test CA", ca_key, ca=False, server=True)
    client_key = _key()
    client = _cert("kinesis-spout test client", client_key, "kinesis-spout test CA", ca_key, ca=False)
    pem = serialization.Encoding.PEM
    files = TlsFiles(directory / "ca.pem", directory / "server.pem", directory / "server-key.pem",
                     directory / "server-bundle.pem", directory / "client.pem", directory / "client-key.pem")
    files.ca_cert.write_bytes(ca.public_bytes(pem))
    files.server_cert.write_bytes(server.public_bytes(pem))
    files.server_key.write_bytes(_pem_key(server_key))
    files.server_bundle.write_bytes(_pem_key(server_key) + server.public_bytes(pem))
    files.client_cert.write_bytes(client.public_bytes(pem))
    files.client_key.write_bytes(_pem_key(client_key))
    for path in (files.server_key, files.server_bundle, files.client_key):
        path.chmod(0o600)
    return files
