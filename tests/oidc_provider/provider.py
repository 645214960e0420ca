"""Start the test provider (``serve.py``) as a subprocess on a free port and act as its users
do: sign in on its login page, approve a device's code."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[2]
READY_SECONDS = 60.0


@dataclass(frozen=True)
class Provider:
    issuer: str
    web_secret: str
    other_secret: str
    web_client_id: str = "herder-web"
    cli_client_id: str = "herder-cli"
    other_client_id: str = "other-app"

    def sign_in(self, client: httpx.Client, url: str, user: str, password: str) -> str:
        """Follow ``url`` (an authorization request) through the provider's login page as
        ``user``; the address the provider sends the browser back to."""
        response = client.get(url)
        while response.is_redirect:
            location = urljoin(str(response.url), response.headers["location"])
            if not location.startswith(self.issuer.rsplit("/o", 1)[0]):
                return location  # back to the relying party
            if "/accounts/login/" in location:
                response = self._log_in(client, location, user, password)
            else:
                response = client.get(location)
        raise AssertionError(f"the provider answered {response.status_code}: {response.text}")

    def tokens(
        self, client_id: str, secret: str, redirect_uri: str, user: str, password: str, nonce: str
    ) -> dict[str, Any]:
        """The token response an application gets for ``user`` (an authorization code with
        PKCE, exchanged): a real ID token to hand to Herder's checks."""
        verifier = secrets.token_urlsafe(48)
        challenge = (
            base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            .rstrip(b"=")
            .decode()
        )
        query = httpx.QueryParams(
            response_type="code",
            client_id=client_id,
            redirect_uri=redirect_uri,
            scope="openid profile email",
            state="s",
            nonce=nonce,
            code_challenge=challenge,
            code_challenge_method="S256",
        )
        with httpx.Client(timeout=10) as browser:
            back = self.sign_in(browser, f"{self.issuer}/authorize/?{query}", user, password)
            code = httpx.URL(back).params["code"]
            answer = browser.post(
                f"{self.issuer}/token/",
                data={
                    "grant_type": "authorization_code",
                    "code": code,
                    "redirect_uri": redirect_uri,
                    "code_verifier": verifier,
                },
                auth=(client_id, secret),
            )
        assert answer.status_code == 200, answer.text
        tokens: dict[str, Any] = answer.json()
        return tokens

    def device_tokens(self, user: str, password: str) -> dict[str, Any]:
        """What ``herder login`` gets: the CLI client's device flow, approved by ``user``."""
        with httpx.Client(timeout=10) as device:
            grant = device.post(
                f"{self.issuer}/device-authorization/",
                data={"client_id": self.cli_client_id, "scope": "openid profile email"},
            ).json()
            self.approve_device(grant["user_code"], user, password)
            answer = device.post(
                f"{self.issuer}/token/",
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
                    "device_code": grant["device_code"],
                    "client_id": self.cli_client_id,
                },
            )
        assert answer.status_code == 200, answer.text
        tokens: dict[str, Any] = answer.json()
        return tokens

    def approve_device(self, user_code: str, user: str, password: str) -> None:
        """As ``user`` in a browser of their own: enter the device's code and accept it."""
        with httpx.Client(timeout=10) as browser:
            device_page = f"{self.issuer}/device/"
            response = browser.get(device_page)
            if response.is_redirect:
                self._log_in(
                    browser, urljoin(device_page, response.headers["location"]), user, password
                )
            page = browser.get(device_page)
            confirm = browser.post(
                device_page,
                data={"user_code": user_code, "csrfmiddlewaretoken": _csrf(page.text)},
            )
            assert confirm.is_redirect, confirm.text
            confirm_page = urljoin(device_page, confirm.headers["location"])
            form = browser.get(confirm_page)
            accepted = browser.post(
                confirm_page, data={"action": "accept", "csrfmiddlewaretoken": _csrf(form.text)}
            )
            assert accepted.is_redirect, accepted.text

    def _log_in(
        self, client: httpx.Client, login_url: str, user: str, password: str
    ) -> httpx.Response:
        form = client.get(login_url)
        next_path = re.search(r'name="next" value="([^"]*)"', form.text)
        answer = client.post(
            login_url,
            data={
                "username": user,
                "password": password,
                "csrfmiddlewaretoken": _csrf(form.text),
                "next": next_path.group(1).replace("&amp;", "&") if next_path else "",
            },
        )
        assert answer.is_redirect, f"{user} could not sign in at the provider"
        return client.get(urljoin(login_url, answer.headers["location"]))


def _csrf(page: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def running_provider(directory: Path, redirects: list[str]) -> Iterator[Provider]:
    """The provider, serving until the block ends; its data under ``directory``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (directory / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    port = _free_port()
    provider = Provider(
        issuer=f"http://127.0.0.1:{port}/o",
        web_secret=secrets.token_urlsafe(24),
        other_secret=secrets.token_urlsafe(24),
    )
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
        "OIDC_PROVIDER_DIR": str(directory),
        "OIDC_PROVIDER_ISSUER": provider.issuer,
        "OIDC_PROVIDER_PORT": str(port),
        "OIDC_PROVIDER_REDIRECTS": " ".join(redirects),
        "OIDC_PROVIDER_WEB_SECRET": provider.web_secret,
        "OIDC_PROVIDER_OTHER_SECRET": provider.other_secret,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.oidc_provider.serve"],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until ready, or EOF if it died
        process.stdout.close()
        assert line.strip() == "ready", f"the provider did not start (exit {process.poll()})"
        yield provider
    finally:
        process.kill()
        process.wait(timeout=READY_SECONDS)
