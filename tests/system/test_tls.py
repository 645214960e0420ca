"""HTTPS end to end: ``herder server --tls-cert/--tls-key`` with a certificate from a CA made
here, a worker and the client trusting that CA alone (``--ca-file``, ``HERDER_CA_FILE``), and
``herder up --tls`` with the certificate it makes for this machine. A client that trusts
another authority, or none given, is refused; so is a bad certificate and key pair at start.
And the store's connections to PostgreSQL under ``sslmode=verify-full``."""

from __future__ import annotations

import ipaddress
import json
import os
import ssl
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from herder.client import HerderClient, ServerUnreachable
from herder.domain.errors import TemporarilyUnavailable
from herder.domain.states import RunState
from herder.store.database import Database
from tests.system.conftest import (
    HERDER,
    START_SECONDS,
    Cluster,
    free_port,
    scripted_database,
    stop,
    wait_until,
)

pytestmark = pytest.mark.system

NOW = datetime.now(UTC)
Key = ec.EllipticCurvePrivateKey


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem(path: Path, certificate: x509.Certificate) -> Path:
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return path


def authority(directory: Path, name: str) -> tuple[Path, x509.Certificate, Key]:
    """A CA of the test's own: its certificate's file, the certificate and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(NOW - timedelta(hours=1)).not_valid_after(NOW + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return _pem(directory / f"{name}.pem", certificate), certificate, key


def server_certificate(
    directory: Path, issuer: tuple[Path, x509.Certificate, Key]
) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by ``issuer``, and its key: the two files."""
    _, issuer_certificate, issuer_key = issuer
    key = ec.generate_private_key(ec.SECP256R1())
    names = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    certificate = (
        x509.CertificateBuilder().subject_name(_name("herder api"))
        .issuer_name(issuer_certificate.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - timedelta(hours=1)).not_valid_after(NOW + timedelta(days=1))
        .add_extension(names, critical=False).sign(issuer_key, hashes.SHA256())
    )  # fmt: skip
    key_file = directory / "server.key"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return _pem(directory / "server.pem", certificate), key_file


def wait_https(url: str, ca_file: Path, process: subprocess.Popen[bytes]) -> None:
    trusting = ssl.create_default_context(cafile=str(ca_file))
    with httpx.Client(timeout=1, verify=trusting) as http:

        def ready() -> bool:
            assert process.poll() is None, f"herder exited with {process.returncode}"
            try:
                return http.get(f"{url}/readyz").status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, START_SECONDS, "the HTTPS server ready")


def refused(url: str, api_key: str, ca_file: Path | None) -> str:
    """What a client trusting ``ca_file`` (else the system's authorities) is told."""
    with (
        pytest.raises(ServerUnreachable) as raised,
        HerderClient(url, api_key, ca_file=ca_file) as herder,
    ):
        herder.list_jobs()
    return str(raised.value)


def test_a_server_with_a_ca_signed_certificate_serves_workers_and_clients_that_trust_it(
    tmp_path: Path,
) -> None:
    ca = authority(tmp_path, "our-ca")
    other_ca, _, _ = authority(tmp_path, "other-ca")
    certificate, key = server_certificate(tmp_path, ca)
    environment = {"HERDER_TLS_CERT": str(certificate), "HERDER_TLS_KEY": str(key)}
    home = tmp_path / "home"
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    cluster = Cluster(
        home=home,
        url=url,
        environment={**os.environ, "HERDER_HOME": str(home), **environment},
        server_args=("server", "--with-scheduler", "--port", str(port)),
    )
    cluster.server = cluster.spawn(*cluster.server_args)
    try:
        wait_https(url, ca[0], cluster.server)
        saved = json.loads((home / "client.json").read_text())
        assert saved["url"] == url
        api_key = saved["api_key"]
        cluster.spawn(
            "worker", "--server", url, "--name", "w", "--home", str(home / "worker-w"),
            "--isolation", "none", HERDER_WORKER_TOKEN=cluster.worker_token,
            HERDER_CA_FILE=str(ca[0]),
        )  # fmt: skip
        with HerderClient(url, api_key, ca_file=ca[0]) as herder:
            wait_until(lambda: len(herder.list_workers()) == 1, START_SECONDS, "the worker")
            job = herder.create_job("hello", {"runtime": "shell", "command": "echo over tls"})
            ended = herder.wait(herder.start_run(job.id).id, timeout=START_SECONDS)
            assert ended.state is RunState.SUCCEEDED, ended.reason
        assert "CERTIFICATE_VERIFY_FAILED" in refused(url, api_key, other_ca)
        assert "CERTIFICATE_VERIFY_FAILED" in refused(url, api_key, None)  # not the system's
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)  # no plain HTTP beside
    finally:
        cluster.stop_all()


def test_a_certificate_and_a_key_that_are_no_pair_stop_the_server_at_start(
    tmp_path: Path,
) -> None:
    certificate, _ = server_certificate(tmp_path, authority(tmp_path, "ca"))
    other_key = ec.generate_private_key(ec.SECP256R1())
    wrong_key = tmp_path / "wrong.key"
    wrong_key.write_bytes(
        other_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    environment = {**os.environ, "HERDER_HOME": str(tmp_path / "home")}
    started = subprocess.run(
        [*HERDER, "server", "--port", str(free_port()), "--tls-cert", str(certificate),
         "--tls-key", str(wrong_key)],
        env=environment, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert started.returncode == 1
    assert f"cannot serve TLS with {certificate} and {wrong_key}" in started.stderr
    alone = subprocess.run(
        [*HERDER, "server", "--tls-cert", str(certificate)],
        env=environment, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert alone.returncode == 1
    assert "both --tls-cert and --tls-key" in alone.stderr


def test_herder_up_tls_makes_its_certificate_and_the_cli_trusts_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    environment = {**os.environ, "HERDER_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    up = subprocess.Popen([*HERDER, "up", "--tls", "--port", str(port)], env=environment)
    try:
        wait_until((home / "tls" / "cert.pem").exists, START_SECONDS, "its certificate made")
        wait_https(url, home / "tls" / "cert.pem", up)
        assert json.loads((home / "client.json").read_text())["url"] == url

        def cli(*args: str) -> str:
            done = subprocess.run(
                [*HERDER, *args], env=environment, capture_output=True, text=True, timeout=120,
                check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            return done.stdout

        cli("job", "create", "hello", "--command", "echo over tls")
        assert "over tls" in cli("run", "start", "hello", "--wait")  # its worker trusts it too
        assert (home / "tls" / "key.pem").stat().st_mode & 0o077 == 0
    finally:
        stop(up)


@pytest.mark.postgres
def test_the_store_reaches_postgresql_over_verified_tls_and_refuses_another_authority(
    tmp_path: Path,
) -> None:
    """``sslmode=verify-full`` in the URL: the store connects over TLS to a server whose
    certificate the named authority signed for its address, and refuses one it did not."""
    ours = authority(tmp_path, "database-ca")
    certificate, key = server_certificate(tmp_path, ours)
    stranger, _, _ = authority(tmp_path, "stranger")
    script = Path(__file__).parents[2] / "scripts" / "test-postgres.sh"
    directory = Path(tempfile.mkdtemp(prefix="herder-test-postgres-"))  # postgres must reach it
    with scripted_database(
        [script, "start", directory], [script, "stop", directory], "PostgreSQL with TLS",
        TLS_CERT=str(certificate), TLS_KEY=str(key),
    ) as url:  # fmt: skip
        verified = Database(f"{url}?sslmode=verify-full&sslrootcert={ours[0]}")
        try:
            with verified.read() as connection:
                encrypted = connection.exec_driver_sql(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
                ).scalar_one()
            assert encrypted is True
        finally:
            verified.dispose()
        for refused_url, why in (
            (f"{url}?sslmode=verify-full&sslrootcert={stranger}", "certificate verify failed"),
            (f"{url}?sslmode=disable", "no encryption"),
        ):
            database = Database(refused_url)
            try:
                with pytest.raises(TemporarilyUnavailable, match=why):
                    database.ping()
            finally:
                database.dispose()
