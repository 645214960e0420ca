"""A webhook connects to the address its check resolved, yet speaks to the name: the Host
header, TLS SNI and the certificate check all use the URL's host, not the address."""

from __future__ import annotations

import asyncio
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from herder.control import webhooks
from herder.store.alerts.deliveries import AttemptOutcome, DueDelivery
from tests.integration.webhook_receiver import running_receiver

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def certificate_for(name: str, directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for ``name`` and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - timedelta(days=1))
        .not_valid_after(NOW + timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certificate_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return certificate_path, key_path


def serving(certificate: Path, key: Path) -> ssl.SSLContext:
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(certificate, key)
    return tls


def post_to(url: str, trusted: Path) -> AttemptOutcome:
    """One delivery to ``url``, whose name resolves to 127.0.0.1, from a client that
    trusts only ``trusted``."""

    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    async def post() -> AttemptOutcome:
        delivery = DueDelivery(
            id="ald_1", attempt=1, url=url, secret="whsec_x", event="test", payload={}
        )
        verify = ssl.create_default_context(cafile=str(trusted))
        async with httpx.AsyncClient(verify=verify, trust_env=False) as client:
            return await webhooks.post(client, delivery, NOW, allow_private=True, resolver=resolver)

    return asyncio.run(post())


def test_https_to_a_pinned_address_sends_and_verifies_the_name(tmp_path: Path) -> None:
    certificate, key = certificate_for("hook.test", tmp_path)
    with running_receiver(tls=serving(certificate, key)) as receiver:
        port = receiver.url.rsplit(":", 1)[1]
        outcome = post_to(f"https://hook.test:{port}/hook", trusted=certificate)
        assert outcome == AttemptOutcome(204, None)
        (received,) = receiver.requests
        assert received.headers["Host"] == f"hook.test:{port}"
        assert receiver.server_names == ["hook.test"]


def test_a_certificate_for_another_name_is_refused(tmp_path: Path) -> None:
    certificate, key = certificate_for("other.test", tmp_path)
    with running_receiver(tls=serving(certificate, key)) as receiver:
        port = receiver.url.rsplit(":", 1)[1]
        outcome = post_to(f"https://hook.test:{port}/hook", trusted=certificate)
        assert outcome.status is None
        assert outcome.error is not None
        assert "CERTIFICATE_VERIFY_FAILED" in outcome.error
        assert receiver.requests == []
