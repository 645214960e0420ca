"""Who is calling. API keys (``ten_….key_….secret``; ``key_….secret`` before cells) admit
the REST API for one tenant; worker tokens (``wtk_….secret``, the fleet's) admit only worker
registration; a registered worker's own secret (``wks_…``, given at registration) admits only
calls for that worker.

Roles are checked here and nowhere else: ``Caller`` (any key: viewers read), ``Operator``
(runs: start, cancel, re-run, repair, backfill, pause and resume), ``Writer`` (definitions),
``SystemAdmin``; a tenant's own admins are checked in ``herder.app.access``. An operator
starts runs with the job's declared parameters only: raw overrides (``RAW_OVERRIDES``)
choose what runs, a developer's decision (``check_overrides``). The caller is
left on the request's state for the audit trail (``herder.api.audit``). A tenant moving
between cells is refused here too (``domain.moves.refusal``: 503 naming the cell), and a
write admitted here is refused again in each of its transactions once the tenant froze
(``store/moves/guard.py``: a key admitted from the recent-keys cache may write later).

People signed in through OpenID Connect (docs/tenants.md "Single sign-on") carry a session:
the dashboard's cookie (``SESSION_COOKIE``: Secure, HttpOnly, SameSite=Lax), or the CLI's bearer
(``hse_…``); a bearer header always wins over the cookie. A change sent with the cookie must
carry its CSRF token (``CSRF_HEADER``, ``domain.sign_in.csrf_token``) and an ``Origin`` of
this server, else 403: another site's page can make a browser send the cookie, never the token.

The dependencies are ``async``: FastAPI runs a sync dependency in a worker thread, a hop
that costs more than the check itself once the key is in the store's recent-keys cache.
"""

from __future__ import annotations

import hmac
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Path, Request
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from herder.domain import moves
from herder.domain.errors import Forbidden, Unauthorized
from herder.domain.keys import is_api_key
from herder.domain.models import Principal, Role
from herder.domain.overrides import RAW_OVERRIDES, RunOverrides
from herder.domain.sign_in import SESSION_TOKEN_PREFIX, csrf_token
from herder.store.moves.guard import acting_for
from herder.store.store import Store


async def get_store(request: HTTPConnection) -> Store:
    store: Store = request.app.state.store
    return store


StoreDep = Annotated[Store, Depends(get_store)]


def _bearer(request: HTTPConnection) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing API key: send the header 'Authorization: Bearer <key>'")
    return token.strip()


SESSION_COOKIE = "__Host-herder_session"
CSRF_HEADER = "X-Herder-CSRF"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def session_cookie(request: HTTPConnection) -> str | None:
    """The session cookie, when the request has no ``Authorization`` header of its own."""
    if "authorization" in request.headers:
        return None
    return request.cookies.get(SESSION_COOKIE) or None


def _check_csrf(request: HTTPConnection, cookie: str, method: str) -> None:
    if method in SAFE_METHODS:
        return
    sent = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(sent.encode(), csrf_token(cookie).encode()):
        raise Forbidden(
            f"a change made with the dashboard's session cookie needs its {CSRF_HEADER} header "
            "(GET /auth/session gives it)"
        )
    origin = urlsplit(request.headers.get("origin", "")).netloc
    if not origin or origin not in _own_origins(request):
        raise Forbidden("a change made with the session cookie must come from this server's pages")


def _own_origins(request: HTTPConnection) -> set[str]:
    """Where this server's pages are served from: the address asked for, and the public one
    the operator named (behind a proxy that rewrites ``Host``)."""
    settings = request.app.state.settings
    public = [settings.outbound.dashboard_url]
    if settings.oidc is not None:
        public.append(settings.oidc.redirect_base)
    named = {urlsplit(url).netloc for url in public if url}
    return {request.headers.get("host", ""), *named} - {""}


async def _caller(store: Store, token: str) -> Principal:
    """A session's person (``hse_…``) or an API key's caller: from the recent cache when it
    can, else checked in a worker thread."""
    sessions = token.startswith(SESSION_TOKEN_PREFIX)
    cached = (store.users if sessions else store.access).recent_principal(token)
    if cached is not None:
        return cached
    check = store.users.authenticate if sessions else store.access.authenticate
    return await run_in_threadpool(check, token)


async def principal(request: Request, store: StoreDep) -> Principal:
    cookie = session_cookie(request)
    if cookie is not None:
        if not cookie.startswith(SESSION_TOKEN_PREFIX):
            raise Unauthorized("the session cookie is not a session: sign in again")
        _check_csrf(request, cookie, request.method)
        token = cookie
    else:
        token = _bearer(request)
    if token.startswith(("wtk_", "wks_")):
        raise Forbidden("worker credentials admit only the worker protocol; use an API key")
    caller = await _caller(store, token)
    if caller.move_state is not None and (
        refused := moves.refusal(
            caller.tenant_id, caller.move_state, caller.move_cell, request.method, request.url.path
        )
    ):
        raise refused
    if not caller.is_system and request.method not in moves.READS:
        acting_for(caller.tenant_id, request.method, request.url.path)  # moves/guard.py
    request.state.principal = caller
    return caller


Caller = Annotated[Principal, Depends(principal)]


async def operator(caller: Caller) -> Principal:
    if not caller.role.may_operate:
        raise Forbidden(f"role {caller.role} may read but not start or stop anything")
    return caller


Operator = Annotated[Principal, Depends(operator)]


async def writer(caller: Caller) -> Principal:
    if not caller.role.may_write:
        if caller.role.may_operate:
            raise Forbidden(
                f"role {caller.role} may start and stop runs but not change definitions"
            )
        raise Forbidden(f"role {caller.role} may read but not change anything")
    return caller


Writer = Annotated[Principal, Depends(writer)]


def check_overrides(caller: Principal, overrides: RunOverrides, field: str = "") -> None:
    """A role that may not change definitions sets only declared parameters: ``args`` or
    ``env`` would let it choose the code a job runs, next to the job's secrets."""
    if caller.role.may_write:
        return
    for name in RAW_OVERRIDES:
        if getattr(overrides, name) is not None:
            raise Forbidden(
                f"role {caller.role} may start runs with the job's declared parameters "
                f"(params) only; setting {name} needs a developer or admin key",
                field=f"{field}{name}",
            )


async def system_admin(caller: Caller) -> Principal:
    if not (caller.is_system and caller.role is Role.ADMIN):
        raise Forbidden("only an admin of the system tenant may do this")
    return caller


SystemAdmin = Annotated[Principal, Depends(system_admin)]


async def worker_token(request: Request, store: StoreDep) -> str:
    token = _bearer(request)
    if is_api_key(token):
        raise Forbidden("API keys cannot use the worker protocol; use a worker token")
    recent = store.access.recent_worker_token(token)
    if recent is not None:
        return recent
    return await run_in_threadpool(store.access.authenticate_worker_token, token)


WorkerToken = Annotated[str, Depends(worker_token)]


def worker_secret(request: HTTPConnection) -> str:
    """The bearer secret a registered worker was given; the fleet token is refused here."""
    secret = _bearer(request)
    if is_api_key(secret):
        raise Forbidden("API keys cannot use the worker protocol; use a worker's secret")
    if not secret.startswith("wks_"):
        raise Unauthorized(
            "calls for a registered worker need its own secret, given at registration: "
            "'Authorization: Bearer <worker_secret>' (the worker token only registers)"
        )
    return secret


WorkerSecret = Annotated[str, Depends(worker_secret)]


async def registered_worker(
    worker_id: Annotated[str, Path()], request: Request, store: StoreDep
) -> str:
    """The worker in the path, when the caller holds that worker's secret."""
    secret = worker_secret(request)
    if not store.access.recently_admitted(worker_id, secret):
        await run_in_threadpool(store.access.authenticate_worker, worker_id, secret)
    return worker_id


RegisteredWorker = Annotated[str, Depends(registered_worker)]
