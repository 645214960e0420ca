"""``herder login``'s side of single sign-on (docs/tenants.md "Single sign-on"): the
server says which provider and client (``GET /auth/config``); the provider's device flow
(RFC 8628) gives a code the person approves in any browser while this polls; the access
token it yields is traded at the server for a session (``POST /auth/cli-sessions``), whose
bearer token (``hse_…``) the CLI keeps."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from herder.client.errors import ApiError

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
SCOPES = "openid profile email groups"
SLOW_DOWN_SECONDS = 5  # RFC 8628 §3.5: each slow_down adds this to the interval


class SignInFailed(Exception):
    """The provider or the server refused, or the code expired before it was approved."""


@dataclass(frozen=True)
class DeviceCode:
    verification_uri: str
    user_code: str
    verification_uri_complete: str | None
    expires_in: float


@dataclass(frozen=True)
class Session:
    token: str
    user_name: str
    tenant_id: str
    role: str
    expires_at: str


def sign_in(
    http: httpx.Client,
    *,
    show: Callable[[DeviceCode], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Session:
    """Sign in at ``http``'s server (its base URL) by the device flow; ``show`` tells the
    person where to go and which code to enter."""
    config = _json(http.get("/auth/config"))
    if not config.get("enabled"):
        raise SignInFailed("this server offers no sign-in through a provider: use an API key")
    client_id = config.get("cli_client_id")
    if not isinstance(client_id, str):
        raise SignInFailed("this server offers no sign-in from the CLI (no CLI client is set)")
    grant = _json(
        http.post(
            str(config["device_authorization_endpoint"]),
            data={"client_id": client_id, "scope": SCOPES},
        )
    )
    code = DeviceCode(
        verification_uri=str(grant["verification_uri"]),
        user_code=str(grant["user_code"]),
        verification_uri_complete=grant.get("verification_uri_complete"),
        expires_in=float(grant.get("expires_in", 600)),
    )
    show(code)
    access_token = _poll(
        http,
        str(config["token_endpoint"]),
        client_id,
        str(grant["device_code"]),
        interval=float(grant.get("interval", 5)),
        deadline=clock() + code.expires_in,
        sleep=sleep,
        clock=clock,
    )
    answer = http.post("/auth/cli-sessions", json={"access_token": access_token})
    if answer.is_error:
        raise SignInFailed(str(ApiError.of(answer)))
    made = answer.json()
    session = made["session"]
    return Session(
        token=made["token"],
        user_name=session["user_name"],
        tenant_id=session["tenant_id"],
        role=session["role"],
        expires_at=session["expires_at"],
    )


def _poll(
    http: httpx.Client,
    token_endpoint: str,
    client_id: str,
    device_code: str,
    *,
    interval: float,
    deadline: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> str:
    """The access token, once the person approved the code (RFC 8628 §3.4 and §3.5)."""
    while clock() < deadline:
        sleep(interval)
        answer = http.post(
            token_endpoint,
            data={"grant_type": DEVICE_GRANT, "device_code": device_code, "client_id": client_id},
        )
        document = _json(answer, errors_allowed=True)
        if answer.status_code == 200 and isinstance(document.get("access_token"), str):
            return str(document["access_token"])
        error = document.get("error")
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            interval += SLOW_DOWN_SECONDS
            continue
        raise SignInFailed(f"the provider refused the sign-in: {error or answer.status_code}")
    raise SignInFailed("the code expired before it was approved: run 'herder login' again")


def _json(response: httpx.Response, *, errors_allowed: bool = False) -> dict[str, Any]:
    if response.is_error and not errors_allowed:
        raise SignInFailed(f"{response.request.url} answered {response.status_code}")
    try:
        document = response.json()
    except ValueError:
        raise SignInFailed(f"{response.request.url} answered no JSON") from None
    if not isinstance(document, dict):
        raise SignInFailed(f"{response.request.url} answered no JSON object")
    return document
