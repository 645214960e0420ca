"""``herder login``'s device flow (``client/sign_in.py``, RFC 8628) against scripted answers:
it polls at the interval, slows down when asked, stops when the code is denied or expires,
and trades the access token for a session only once approved. The real provider's flow is
``tests/system/test_cli_sign_in.py``."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from herder.client.sign_in import DeviceCode, Session, SignInFailed, sign_in

CONFIG = {
    "enabled": True,
    "cli_client_id": "herder-cli",
    "device_authorization_endpoint": "https://idp.example/device-authorization/",
    "token_endpoint": "https://idp.example/token/",
}
GRANT = {
    "device_code": "dc",
    "user_code": "WDJB-MJHT",
    "verification_uri": "https://idp.example/device/",
    "expires_in": 30,
    "interval": 2,
}
SESSION = {
    "token": "hse_ses_1.s",
    "session": {
        "user_name": "alice",
        "tenant_id": "ten_1",
        "role": "admin",
        "expires_at": "2026-12-08T02:00:00Z",
    },
}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def server(
    token_answers: list[tuple[int, dict[str, object]]], config: dict[str, object] = CONFIG
) -> Callable[[httpx.Request], httpx.Response]:
    traded: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/config":
            return httpx.Response(200, json=config)
        if request.url.path == "/device-authorization/":
            return httpx.Response(200, json=GRANT)
        if request.url.path == "/token/":
            status, body = token_answers.pop(0)
            return httpx.Response(status, json=body)
        if request.url.path == "/auth/cli-sessions":
            traded.append(request.content.decode())
            return httpx.Response(201, json=SESSION)
        return httpx.Response(404, json={})

    return answer


def log_in(handler: Callable[[httpx.Request], httpx.Response], clock: Clock) -> Session:
    shown: list[DeviceCode] = []
    with httpx.Client(
        base_url="https://herder.example", transport=httpx.MockTransport(handler)
    ) as http:
        session = sign_in(http, show=shown.append, sleep=clock.sleep, clock=lambda: clock.now)
    assert shown[0].user_code == "WDJB-MJHT"
    return session


def test_it_polls_until_approved_slowing_down_when_asked() -> None:
    clock = Clock()
    answers: list[tuple[int, dict[str, object]]] = [
        (400, {"error": "authorization_pending"}),
        (400, {"error": "slow_down"}),
        (200, {"access_token": "at", "token_type": "Bearer"}),
    ]
    session = log_in(server(answers), clock)
    assert session.user_name == "alice"
    assert clock.slept == [2, 2, 7]  # slow_down adds 5 s to the interval


@pytest.mark.parametrize(
    ("answers", "refusal"),
    [
        ([(400, {"error": "access_denied"})], "access_denied"),
        ([(400, {"error": "expired_token"})], "expired_token"),
        ([(400, {"error": "authorization_pending"})] * 20, "expired before it was approved"),
        ([(500, {})], "500"),
    ],
)
def test_it_stops_when_the_provider_says_no(
    answers: list[tuple[int, dict[str, object]]], refusal: str
) -> None:
    with pytest.raises(SignInFailed, match=refusal):
        log_in(server(answers), Clock())


@pytest.mark.parametrize(
    ("config", "refusal"),
    [
        ({"enabled": False}, "no sign-in through a provider"),
        ({**CONFIG, "cli_client_id": None}, "no sign-in from the CLI"),
    ],
)
def test_a_server_without_sign_in_says_so(config: dict[str, object], refusal: str) -> None:
    with pytest.raises(SignInFailed, match=refusal):
        log_in(server([], config), Clock())
