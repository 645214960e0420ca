"""``herder up --tls``'s certificate: for this machine's loopback names, kept while valid,
made again near its end; and a CA file that cannot be used said plainly."""

from __future__ import annotations

import ipaddress
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509

from herder.tls import LOCAL_VALID_DAYS, TlsError, client_context, local_certificate

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def test_the_local_certificate_names_the_loopback_and_its_key_is_private(tmp_path: Path) -> None:
    made = local_certificate(tmp_path / "tls", NOW)
    certificate = x509.load_pem_x509_certificate(made.certificate.read_bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert set(names.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"),
    }  # fmt: skip
    assert certificate.not_valid_after_utc == NOW + timedelta(days=LOCAL_VALID_DAYS)
    assert made.key.stat().st_mode & 0o777 == 0o600
    made.check()  # a pair the server can load
    client_context(made.certificate)  # and a CA file a client can trust


def test_it_is_kept_while_valid_and_made_again_near_its_end(tmp_path: Path) -> None:
    first = local_certificate(tmp_path, NOW).certificate.read_bytes()
    assert local_certificate(tmp_path, NOW + timedelta(days=300)).certificate.read_bytes() == first
    renewed = local_certificate(tmp_path, NOW + timedelta(days=340)).certificate.read_bytes()
    assert renewed != first


def test_a_ca_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    with pytest.raises(TlsError, match=r"missing\.pem"):
        client_context(missing)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(TlsError, match=r"garbage\.pem"):
        client_context(garbage)


def test_without_a_ca_file_the_systems_authorities_are_trusted() -> None:
    context = client_context(None)
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname
