"""TLS at the edges: the server's certificate and key as the operator gives them, the one
``herder up --tls`` makes for this machine, and how a client (the CLI, a worker) trusts a
server: by the system's authorities, or by the one in a CA file it is given."""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from herder.credentials import write_private

LOCAL_NAMES = ("localhost",)
LOCAL_ADDRESSES = ("127.0.0.1", "::1")
LOCAL_VALID_DAYS = 365
RENEW_WITHIN_DAYS = 30  # a made certificate this close to its end is made again


class TlsError(Exception):
    """A certificate, key or CA file that cannot be used: the message says which and why."""


@dataclass(frozen=True)
class ServerCertificate:
    """The files the API serves TLS with (PEM)."""

    certificate: Path
    key: Path

    def check(self) -> None:
        """Load them as the server will, so a bad pair fails at start, saying which."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(self.certificate, self.key)
        except (OSError, ssl.SSLError) as error:
            raise TlsError(
                f"cannot serve TLS with {self.certificate} and {self.key}: {error}"
            ) from error


def client_context(ca_file: Path | None) -> ssl.SSLContext:
    """How a client checks the server: the system's authorities, or ``ca_file``'s alone
    (a private CA, or ``herder up --tls``'s own certificate). Host names are checked."""
    if ca_file is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as error:
        raise TlsError(f"cannot use {ca_file} as the CA file: {error}") from error


def local_certificate(directory: Path, now: datetime | None = None) -> ServerCertificate:
    """A self-signed certificate for this machine's loopback names (``localhost``,
    127.0.0.1, ::1) in ``directory`` (``cert.pem``, and ``key.pem`` private): the one there,
    or a new one when there is none or it ends within ``RENEW_WITHIN_DAYS``. It is its own
    authority: a client given it as its CA file trusts this server and no other."""
    # imported here: a worker and the CLI, which only check certificates, never load it
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = now or datetime.now(UTC)
    made = ServerCertificate(directory / "cert.pem", directory / "key.pem")
    if made.certificate.exists() and made.key.exists():
        existing = x509.load_pem_x509_certificate(made.certificate.read_bytes())
        if existing.not_valid_after_utc - now > timedelta(days=RENEW_WITHIN_DAYS):
            return made
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "herder local server")])
    alternatives: list[x509.GeneralName] = [x509.DNSName(host) for host in LOCAL_NAMES]
    alternatives += [x509.IPAddress(ipaddress.ip_address(a)) for a in LOCAL_ADDRESSES]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))  # a client clock a little behind
        .not_valid_after(now + timedelta(days=LOCAL_VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    write_private(made.key, key_pem.decode())
    made.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return made
