"""Signing in through OpenID Connect (docs/tenants.md "Single sign-on") against a real
provider (django-oauth-toolkit, ``tests/oidc_provider``) started by the test: the dashboard's
flow from the login redirect to a cookie that admits, changes only with the CSRF token from
this server's pages, sign-out and revocation; and every refusal — a wrong issuer, an expired
ID token, a token for another application, a replayed code, a state or nonce not this
browser's, open redirects, a person no group maps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from herder.api.app import create_app
from herder.api.auth import CSRF_HEADER, SESSION_COOKIE
from herder.api.oidc import Provider as RelyingParty
from herder.domain.errors import HerderError, Unauthorized
from herder.domain.models import Role
from herder.domain.sign_in import parse_group_grants
from herder.settings import OidcSettings, Settings
from herder.store.store import Store
from tests.oidc_provider.provider import Provider, running_provider

SERVER = "https://testserver"
CALLBACK = f"{SERVER}/auth/callback"
ORIGIN = {"Origin": SERVER}


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    with running_provider(tmp_path_factory.mktemp("provider"), [CALLBACK]) as running:
        yield running


def oidc_settings(provider: Provider) -> OidcSettings:
    return OidcSettings(
        issuer=provider.issuer,
        client_id=provider.web_client_id,
        client_secret=provider.web_secret,
        cli_client_id=provider.cli_client_id,
        provider_name="Test provider",
        group_grants=parse_group_grants("herder-admins=acme:admin,herder-viewers=acme:viewer"),
    )


@pytest.fixture
def acme(store: Store) -> str:
    store.access.bootstrap()
    return store.access.create_tenant("acme").id


@pytest.fixture
def http(store: Store, acme: str, provider: Provider, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        home=tmp_path, database_url=store.database.url, oidc=oidc_settings(provider)
    )
    with TestClient(create_app(store, settings), base_url=SERVER) as client:
        yield client


def sign_in(
    http: TestClient, provider: Provider, user: str = "alice", next_path: str = "/runs"
) -> httpx.Response:
    """The browser's walk: Herder's login, the provider's page, back to Herder's callback."""
    started = http.get("/auth/login", params={"next": next_path}, follow_redirects=False)
    assert started.status_code == 303, started.text
    with httpx.Client(timeout=10) as browser:
        back = provider.sign_in(browser, started.headers["location"], user, f"{user}-password")
    assert back.startswith(CALLBACK), back
    answer: httpx.Response = http.get(back.removeprefix(SERVER), follow_redirects=False)
    return answer


def test_a_person_signs_in_and_the_cookie_admits_them(
    http: TestClient, provider: Provider, acme: str
) -> None:
    answer = sign_in(http, provider)
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/runs"
    cookie = answer.headers["set-cookie"]
    for attribute in ("Secure", "HttpOnly", "SameSite=lax", "Path=/"):
        assert attribute.lower() in cookie.lower()
    assert http.cookies.get(SESSION_COOKIE, "").startswith("hse_ses_")

    session = http.get("/auth/session").json()
    assert session["user_name"] == "alice"
    assert session["email"] == "alice@example.test"
    assert (session["tenant_id"], session["role"]) == (acme, "admin")
    assert session["user_id"].startswith("usr_")
    assert http.get("/v1/jobs").status_code == 200

    job = {"name": "by-alice", "runtime": "shell", "command": "true"}
    csrf = {CSRF_HEADER: session["csrf_token"]}
    assert http.post("/v1/jobs", json=job).status_code == 403  # no CSRF token
    assert http.post("/v1/jobs", json=job, headers=csrf).status_code == 403  # no Origin
    wrong_origin = {**csrf, "Origin": "https://evil.example"}
    assert http.post("/v1/jobs", json=job, headers=wrong_origin).status_code == 403
    made = http.post("/v1/jobs", json=job, headers={**csrf, **ORIGIN})
    assert made.status_code == 201, made.text

    entries = http.get("/v1/audit").json()["items"]
    assert entries[0]["key_id"] == session["session_id"]
    assert (entries[0]["actor"], entries[0]["actor_name"]) == (
        f"user:{session['user_id']}",
        "alice",
    )
    job_made = http.get(f"/v1/jobs/{made.json()['id']}").json()
    assert (job_made["created_by"], job_made["created_by_name"]) == (
        f"user:{session['user_id']}",
        "alice",
    )
    started = http.post(f"/v1/jobs/{made.json()['id']}/runs", json={}, headers={**csrf, **ORIGIN})
    assert started.status_code == 201, started.text
    events = http.get(f"/v1/runs/{started.json()['id']}/events").json()
    assert [e["actor_name"] for e in events if e["actor"] == f"user:{session['user_id']}"] == [
        "alice"
    ]  # its run's events name the person

    assert http.post("/auth/logout", headers={**csrf, **ORIGIN}).status_code == 204
    assert http.get("/auth/session").status_code == 401


def test_a_person_whose_groups_map_to_no_tenant_is_refused(
    http: TestClient, provider: Provider
) -> None:
    answer = sign_in(http, provider, user="mallory")
    assert answer.status_code == 403
    assert "none of your groups" in answer.json()["detail"]
    assert SESSION_COOKIE not in http.cookies


def test_a_viewer_signs_in_as_a_viewer(http: TestClient, provider: Provider) -> None:
    assert sign_in(http, provider, user="bob").status_code == 303
    assert http.get("/auth/session").json()["role"] == Role.VIEWER


@pytest.mark.parametrize(
    "next_path", ["https://evil.example", "//evil.example", "/\\evil.example", "runs", "/a\nb"]
)
def test_open_redirects_are_refused(http: TestClient, next_path: str) -> None:
    answer = http.get("/auth/login", params={"next": next_path}, follow_redirects=False)
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["field"] == "next"


def test_a_replayed_code_is_refused(http: TestClient, provider: Provider) -> None:
    started = http.get("/auth/login", follow_redirects=False)
    login_cookie = http.cookies["__Host-herder_login"]
    with httpx.Client(timeout=10) as browser:
        back = provider.sign_in(browser, started.headers["location"], "alice", "alice-password")
    assert http.get(back.removeprefix(SERVER), follow_redirects=False).status_code == 303
    http.cookies.clear()
    http.cookies.set("__Host-herder_login", login_cookie)  # the very same sign-in, again
    replayed = http.get(back.removeprefix(SERVER), follow_redirects=False)
    assert replayed.status_code == 401
    assert "refused the sign-in's code" in replayed.json()["detail"]
    assert SESSION_COOKIE not in http.cookies


def test_a_state_not_this_browsers_is_refused(http: TestClient, provider: Provider) -> None:
    started = http.get("/auth/login", follow_redirects=False)
    with httpx.Client(timeout=10) as browser:
        back = provider.sign_in(browser, started.headers["location"], "alice", "alice-password")
    code = httpx.URL(back).params["code"]
    forged = http.get("/auth/callback", params={"code": code, "state": "x"})
    assert forged.status_code == 403
    assert "state" in forged.json()["detail"]
    http.cookies.clear()  # another browser: an attacker's code and state, the victim's browser
    elsewhere = http.get(back.removeprefix(SERVER), follow_redirects=False)
    assert elsewhere.status_code == 403
    assert SESSION_COOKIE not in http.cookies


def test_a_nonce_not_this_sign_ins_is_refused(http: TestClient, provider: Provider) -> None:
    started = httpx.URL(http.get("/auth/login", follow_redirects=False).headers["location"])
    swapped = started.copy_set_param("nonce", "another-sign-in")
    with httpx.Client(timeout=10) as browser:
        back = provider.sign_in(browser, str(swapped), "alice", "alice-password")
    answer = http.get(back.removeprefix(SERVER), follow_redirects=False)
    assert answer.status_code == 401
    assert "nonce" in answer.json()["detail"]


def _refusal(relying_party: RelyingParty, id_token: str, nonce: str, now: float) -> HerderError:
    with pytest.raises(HerderError) as refused:
        asyncio.run(relying_party.id_token_claims(id_token, nonce=nonce, now_seconds=now))
    return refused.value


def test_id_tokens_are_checked(provider: Provider) -> None:
    """A real ID token for Herder passes; expired, for another application, from another
    issuer or signed by anyone else, it is refused."""
    settings = oidc_settings(provider)
    ours = provider.tokens(
        provider.web_client_id, provider.web_secret, CALLBACK, "alice", "alice-password", "n1"
    )["id_token"]
    claims = asyncio.run(
        RelyingParty(settings).id_token_claims(ours, nonce="n1", now_seconds=time.time())
    )
    assert claims["preferred_username"] == "alice"

    expired = _refusal(RelyingParty(settings), ours, "n1", time.time() + 3600)
    assert isinstance(expired, Unauthorized)
    assert "expired" in expired.detail

    theirs = provider.tokens(
        provider.other_client_id, provider.other_secret, CALLBACK, "alice", "alice-password", "n1"
    )["id_token"]
    other_audience = _refusal(RelyingParty(settings), theirs, "n1", time.time())
    assert "another application" in other_audience.detail

    port = urlsplit(provider.issuer).port
    wrong_issuer = replace(settings, issuer=f"http://localhost:{port}/o")
    refused = _refusal(RelyingParty(wrong_issuer), ours, "n1", time.time())
    assert isinstance(refused, Unauthorized)
    assert "issuer" in refused.detail

    header, payload, signature = ours.split(".")
    forged = f"{header}.{payload}.{signature[::-1]}"
    assert "does not verify" in _refusal(RelyingParty(settings), forged, "n1", time.time()).detail


def test_the_cli_trades_a_device_flow_token_for_a_session(
    http: TestClient, provider: Provider, acme: str
) -> None:
    tokens = provider.device_tokens("alice", "alice-password")
    made = http.post("/auth/cli-sessions", json={"access_token": tokens["access_token"]})
    assert made.status_code == 201, made.text
    token = made.json()["token"]
    assert token.startswith("hse_ses_")
    bearer = {"Authorization": f"Bearer {token}"}
    session = http.get("/auth/session", headers=bearer).json()
    assert (session["user_name"], session["tenant_id"], session["csrf_token"]) == (
        "alice",
        acme,
        None,
    )
    job = {"name": "cli", "runtime": "shell", "command": "true"}
    assert http.post("/v1/jobs", headers=bearer, json=job).status_code == 201
    assert http.post("/auth/logout", headers=bearer).status_code == 204
    assert http.get("/auth/session", headers=bearer).status_code == 401


def test_the_cli_refuses_another_applications_token(http: TestClient, provider: Provider) -> None:
    theirs = provider.tokens(
        provider.other_client_id, provider.other_secret, CALLBACK, "alice", "alice-password", "n"
    )["access_token"]
    refused = http.post("/auth/cli-sessions", json={"access_token": theirs})
    assert refused.status_code == 401
    assert "another application" in refused.json()["detail"]
    unknown = http.post("/auth/cli-sessions", json={"access_token": "not-a-token"})
    assert unknown.status_code == 401


def test_an_admin_revokes_a_session(
    http: TestClient, provider: Provider, store: Store, acme: str
) -> None:
    assert sign_in(http, provider, user="bob").status_code == 303
    cookie = http.cookies[SESSION_COOKIE]
    admin_key = store.access.create_api_key(acme, Role.ADMIN, "admin")[1]
    admin = {"Authorization": f"Bearer {admin_key}"}
    listed = http.get("/v1/sessions", headers=admin).json()["items"]
    assert [(item["user_name"], item["kind"]) for item in listed] == [("bob", "dashboard")]
    revoked = http.post(f"/v1/sessions/{listed[0]['id']}/revoke", headers=admin)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    http.cookies.set(SESSION_COOKIE, cookie)
    assert http.get("/auth/session").status_code == 401
    other = store.access.create_tenant("other").id
    other_admin = store.access.create_api_key(other, Role.ADMIN, "admin")[1]
    foreign = http.post(
        f"/v1/sessions/{listed[0]['id']}/revoke",
        headers={"Authorization": f"Bearer {other_admin}"},
    )
    assert foreign.status_code == 404


def test_sign_in_is_off_unless_configured(store: Store, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, database_url=store.database.url)
    with TestClient(create_app(store, settings), base_url=SERVER) as http:
        assert http.get("/auth/config").json() == {
            "enabled": False,
            "provider_name": None,
            "issuer": None,
            "cli_client_id": None,
            "device_authorization_endpoint": None,
            "token_endpoint": None,
        }
        assert http.get("/auth/login", follow_redirects=False).status_code == 404
        assert http.post("/auth/cli-sessions", json={"access_token": "x"}).status_code == 404


def test_hostile_sign_in_input_is_refused_clearly(http: TestClient, store: Store) -> None:
    """Whatever a browser or an attacker sends: a problem that says what is wrong, never a
    500, never a session."""
    long_state = http.get("/auth/callback", params={"code": "c", "state": "s" * 3000})
    assert long_state.status_code == 422
    assert http.get("/auth/callback", params={"code": "c", "state": "s"}).status_code == 403
    forged_cookies = [
        "%%%",
        "W10=",  # [] in base64
        "eyJzdGF0ZSI6InMifQ==",  # {"state": "s"}: no nonce, verifier, next
        # a well-formed one whose next is another site
        "eyJzdGF0ZSI6InMiLCJub25jZSI6Im4iLCJ2ZXJpZmllciI6InYiLCJuZXh0IjoiLy9ldmlsIn0=",
        "A" * 5000,
    ]
    for forged in forged_cookies:
        http.cookies.clear()
        http.cookies.set("__Host-herder_login", forged)
        answer = http.get("/auth/callback", params={"code": "c", "state": "s"})
        assert answer.status_code == 403, (forged, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
    http.cookies.clear()

    admin_key = store.access.create_api_key(
        store.access.create_tenant("hostile").id, Role.ADMIN, "admin"
    )[1]
    for cookie in ["garbage", "hse_ses_x", "hse_ses_1." + "a" * 5000, "hse_", admin_key]:
        http.cookies.set(SESSION_COOKIE, cookie)
        answer = http.get("/auth/session")
        assert answer.status_code == 401, (cookie, answer.text)
        http.cookies.clear()

    for body in [{}, {"access_token": ""}, {"access_token": "x" * 9000}, {"access_token": 7}]:
        assert http.post("/auth/cli-sessions", json=body).status_code == 422, body
    own = http.post("/auth/cli-sessions", json={"access_token": "hse_ses_1.s"})
    assert own.status_code == 401


def test_a_provider_that_cannot_be_reached_is_a_503(store: Store, tmp_path: Path) -> None:
    closed = OidcSettings(
        issuer="http://127.0.0.1:9/o",
        client_id="herder-web",
        client_secret="s",
        group_grants=parse_group_grants("g=acme:viewer"),
    )
    settings = Settings(home=tmp_path, database_url=store.database.url, oidc=closed)
    with TestClient(create_app(store, settings), base_url=SERVER) as http:
        answer = http.get("/auth/login", follow_redirects=False)
        assert answer.status_code == 503
        assert "cannot be reached" in answer.json()["detail"]
