"""/auth: people signing in through OpenID Connect (docs/tenants.md "Single sign-on"), off
(404) unless ``HERDER_OIDC_ISSUER`` is set.

The dashboard: ``GET /auth/login?next=`` sends the browser to the provider with a state, a
nonce and a PKCE challenge, the three kept in a short-lived HttpOnly cookie bound to this
browser (``LOGIN_COOKIE``); ``GET /auth/callback`` takes the provider's code only with that
cookie's state, exchanges it with the verifier, checks the ID token (``api.oidc``), maps the
person and sets the session cookie (``api.auth.SESSION_COOKIE``, Secure, HttpOnly,
SameSite=Lax: the dashboard opened from a link in an alert's email is signed in; a change
needs the CSRF header anyway); ``GET /auth/session`` says who is signed in, with the CSRF
token; ``POST /auth/logout`` revokes the session. The CLI: ``POST /auth/cli-sessions`` trades
an access token the provider issued to the CLI's client (``herder login``'s device flow) for
a bearer session token (``hse_…``). ``GET /auth/config`` tells both what is on.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from herder.api.auth import SESSION_COOKIE, Caller, StoreDep, session_cookie
from herder.api.oidc import Pkce, Provider
from herder.api.openapi import problems
from herder.app import sign_in as sign_in_use_case
from herder.domain.errors import Conflict, Forbidden, Invalid, NotFound, Unauthorized
from herder.domain.models import Role
from herder.domain.sign_in import (
    SESSION_TOKEN_PREFIX,
    Session,
    csrf_token,
    return_path,
)
from herder.settings import OidcSettings, Settings

router = APIRouter(prefix="/auth", tags=["sign-in"])

LOGIN_COOKIE = "__Host-herder_login"
LOGIN_SECONDS = 600  # a sign-in at the provider must come back within this
MAX_LOGIN_COOKIE = 1024  # bytes: a larger one is not ours
CODE_LENGTH = 2048  # the provider's code and state, bounded before anything reads them


class SignInConfig(BaseModel):
    """What sign-in this server offers: the dashboard's button, ``herder login``'s flow."""

    enabled: bool
    provider_name: str | None = None
    issuer: str | None = None
    cli_client_id: str | None = None
    device_authorization_endpoint: str | None = None
    token_endpoint: str | None = None


class SignedIn(BaseModel):
    """Who the caller is; ``csrf_token`` when signed in by the dashboard's cookie: the value
    of the ``X-Herder-CSRF`` header every change must carry."""

    tenant_id: str
    role: Role
    session_id: str
    user_id: str | None
    user_name: str
    email: str
    csrf_token: str | None = None


class CliSessionRequest(BaseModel):
    access_token: str = Field(min_length=1, max_length=8192)


class CliSession(BaseModel):
    """The bearer token (``hse_…``): its only copy, kept 0600 by ``herder login``."""

    token: str
    session: Session


def _settings(request: Request) -> OidcSettings:
    settings: Settings = request.app.state.settings
    if settings.oidc is None:
        raise NotFound("sign-in through OpenID Connect is off on this server")
    return settings.oidc


def _provider(request: Request) -> Provider:
    settings = _settings(request)
    provider: Provider | None = getattr(request.app.state, "oidc_provider", None)
    if provider is None or provider.settings is not settings:
        provider = Provider(settings)
        request.app.state.oidc_provider = provider
    return provider


def _redirect_uri(request: Request, settings: OidcSettings) -> str:
    server: Settings = request.app.state.settings
    base = settings.redirect_base or server.outbound.dashboard_url or str(request.base_url)
    return f"{base.rstrip('/')}/auth/callback"


def _set_cookie(response: Response, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name, value, max_age=max_age, path="/", secure=True, httponly=True, samesite="lax"
    )


@router.get("/config", responses=problems(503))
async def config(request: Request) -> SignInConfig:
    """Whether sign-in is on, and what the dashboard's button and ``herder login`` need."""
    settings: Settings = request.app.state.settings
    if settings.oidc is None:
        return SignInConfig(enabled=False)
    metadata = await _provider(request).metadata()
    return SignInConfig(
        enabled=True,
        provider_name=settings.oidc.provider_name,
        issuer=settings.oidc.issuer,
        cli_client_id=settings.oidc.cli_client_id,
        device_authorization_endpoint=metadata.device_authorization_endpoint,
        token_endpoint=metadata.token_endpoint,
    )


@router.get(
    "/login",
    status_code=status.HTTP_303_SEE_OTHER,
    responses=problems(401, 403, 404, 422, 503),
    response_class=RedirectResponse,
)
async def login(
    request: Request, next_path: Annotated[str | None, Query(alias="next")] = None
) -> RedirectResponse:
    """To the provider's sign-in; back to ``next`` (a path of this dashboard) once done."""
    settings = _settings(request)
    target = return_path(next_path)
    provider = _provider(request)
    pkce = Pkce.new()
    url = provider.authorization_url(
        await provider.metadata(), pkce, _redirect_uri(request, settings)
    )
    response = RedirectResponse(url, status_code=status.HTTP_303_SEE_OTHER)
    pending = {"state": pkce.state, "nonce": pkce.nonce, "verifier": pkce.verifier, "next": target}
    encoded = base64.urlsafe_b64encode(json.dumps(pending).encode()).decode()
    _set_cookie(response, LOGIN_COOKIE, encoded, LOGIN_SECONDS)
    return response


def _pending(request: Request) -> tuple[Pkce, str]:
    """The sign-in this browser started: its secrets and where it goes back to."""
    cookie = request.cookies.get(LOGIN_COOKIE, "")
    try:
        if not cookie or len(cookie) > MAX_LOGIN_COOKIE:
            raise ValueError
        pending = json.loads(base64.urlsafe_b64decode(cookie.encode()))
        pkce = Pkce(str(pending["state"]), str(pending["nonce"]), str(pending["verifier"]))
        return pkce, return_path(str(pending["next"]))
    except (ValueError, KeyError, TypeError, binascii.Error, Invalid):
        raise Forbidden(
            "no sign-in was started in this browser, or it took too long: sign in again"
        ) from None


@router.get(
    "/callback",
    status_code=status.HTTP_303_SEE_OTHER,
    responses=problems(401, 403, 404, 503),
    response_class=RedirectResponse,
)
async def callback(
    request: Request,
    store: StoreDep,
    code: Annotated[str | None, Query(max_length=CODE_LENGTH)] = None,
    state: Annotated[str | None, Query(max_length=CODE_LENGTH)] = None,
    error: Annotated[str | None, Query(max_length=CODE_LENGTH)] = None,
) -> RedirectResponse:
    """Where the provider sends the browser back: the session cookie set, then to ``next``."""
    settings = _settings(request)
    pkce, target = _pending(request)
    if state is None or not hmac.compare_digest(state.encode(), pkce.state.encode()):
        raise Forbidden("the sign-in's state is not this browser's: sign in again")
    if error is not None or code is None:
        raise Unauthorized(f"the provider did not sign you in ({error or 'no code'})")
    claims = await _provider(request).sign_in(code, pkce, _redirect_uri(request, settings))
    session, token = await run_in_threadpool(
        sign_in_use_case.sign_in, store, settings, claims, kind="dashboard"
    )
    response = RedirectResponse(target, status_code=status.HTTP_303_SEE_OTHER)
    response.delete_cookie(LOGIN_COOKIE, path="/", secure=True, httponly=True, samesite="lax")
    lifetime = int((session.expires_at - session.created_at).total_seconds())
    _set_cookie(response, SESSION_COOKIE, token, lifetime)
    return response


@router.get("/session", responses=problems(401))
async def current_session(caller: Caller, request: Request) -> SignedIn:
    """Who is signed in (an API key's caller too), and the cookie's CSRF token."""
    cookie = session_cookie(request)
    return SignedIn(
        tenant_id=caller.tenant_id,
        role=caller.role,
        session_id=caller.key_id,
        user_id=caller.user_id,
        user_name=caller.user_name or caller.key_name,
        email=caller.email,
        csrf_token=csrf_token(cookie) if cookie is not None else None,
    )


@router.post("/logout", status_code=status.HTTP_204_NO_CONTENT, responses=problems(401, 403, 409))
async def logout(caller: Caller, store: StoreDep) -> Response:
    """End the caller's session (the cookie's or the CLI's bearer) at once."""
    if caller.user_id is None:
        raise Conflict("an API key is not signed out: revoke it (POST /v1/keys/{id}/revoke)")
    await run_in_threadpool(store.users.revoke, caller.tenant_id, caller.key_id)
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True, samesite="lax")
    return response


@router.post(
    "/cli-sessions", status_code=status.HTTP_201_CREATED, responses=problems(401, 403, 404, 422)
)
async def cli_session(body: CliSessionRequest, request: Request, store: StoreDep) -> CliSession:
    """A bearer session for ``herder login``: the access token the provider issued to
    Herder's CLI client (the device flow), checked with the provider, traded once for it."""
    settings = _settings(request)
    if body.access_token.startswith(SESSION_TOKEN_PREFIX):
        raise Unauthorized("send the provider's access token, not a Herder session")
    claims = await _provider(request).cli_claims(body.access_token)
    session, token = await run_in_threadpool(
        sign_in_use_case.sign_in, store, settings, claims, kind="cli"
    )
    return CliSession(token=token, session=session)
