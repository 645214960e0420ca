"""The audit trail: every mutating ``/v1`` call made with an API key is recorded once it has
been answered (``herder.domain.audit`` names it; ``herder.store.audit`` keeps it).

It sits under every route, so a route added later is recorded without any change to it. The
record is written after the answer, in its own transaction, like the Kubernetes API server's
audit at ``ResponseComplete``: a change and its record are not atomic, and a process that
dies between the two loses the record (never the change). A call refused before its key was
checked (401, 413) names nobody and is not recorded.

An entry is filed in the caller's tenant's log, and a system admin's change to another
tenant also in that tenant's: the tenant is the route's ``{tenant_id}``, or the one a route
names with ``acted_on`` (a key's tenant, known only once the key is read). A tenant that is
not in this cell has no log here: the copy is not filed, and the caller's entry records the
call (a tenant arriving in a move, its programs' bytes sent before its import; an import
taken back).
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herder.domain import audit
from herder.domain.models import Principal
from herder.store.audit import AuditCall
from herder.store.moves.guard import unguarded
from herder.store.store import Store

MAX_CREATED_BODY = 1024 * 1024  # bytes of a creation's answer read for the new object's id
MAX_OBJECT_ID = 255  # characters of the id a call names that its entry keeps (its column's)
log = logging.getLogger("herder.api.audit")


class AuditTrail:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in audit.MUTATING_METHODS:
            await self.app(scope, receive, send)
            return
        is_json = b"json" in dict(scope["headers"]).get(b"content-type", b"")  # +json too
        request_body = bytearray()
        response_body = bytearray()
        status = 500
        created = False

        async def recorded_receive() -> Message:
            message = await receive()
            if is_json and message["type"] == "http.request":
                request_body.extend(message.get("body", b""))
            return message

        async def recorded_send(message: Message) -> None:
            nonlocal status, created
            if message["type"] == "http.response.start":
                status = message["status"]
                created = status < 300 and _creates(scope)
            elif created and len(response_body) < MAX_CREATED_BODY:
                response_body.extend(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, recorded_receive, recorded_send)
        finally:
            call = _call(scope, status, bytes(request_body), bytes(response_body))
            if call is not None:
                await _record(scope, call)
                if status < 400 and call.tenant_id != (other := _other_tenant(scope, call)):
                    await _record(scope, replace(call, tenant_id=other), copy=True)


def acted_on(request: Request, tenant_id: str) -> None:
    """Say which tenant the call changed, when its route does not name it."""
    request.state.audit_tenant_id = tenant_id


def _other_tenant(scope: Scope, call: AuditCall) -> str:
    state = scope.get("state", {})
    named = state.get("audit_tenant_id") or scope.get("path_params", {}).get("tenant_id")
    return named if isinstance(named, str) else call.tenant_id


def _creates(scope: Scope) -> bool:
    route = scope.get("route")
    return route is not None and "{" not in getattr(route, "path", "{")


def _call(scope: Scope, status: int, request_body: bytes, response_body: bytes) -> AuditCall | None:
    caller = scope.get("state", {}).get("principal")
    route = getattr(scope.get("route"), "path", None)
    method = scope["method"]
    if not isinstance(caller, Principal) or route is None or not audit.is_audited(method, route):
        return None
    object_type, object_id = audit.target(route, scope.get("path_params", {}))
    if object_id is not None:  # as the path named it: no object's id is longer
        object_id = object_id[:MAX_OBJECT_ID]
    elif response_body:
        object_id = _created_id(response_body)
    return AuditCall(
        tenant_id=caller.tenant_id,
        caller=caller,
        action=audit.action(method, route),
        method=method,
        route=route,
        object_type=object_type,
        object_id=object_id,
        # only an accepted change's names: those its route's schema took
        fields=audit.field_names(_json(request_body)) if status < 400 else [],
        status=status,
    )


def _json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:  # UnicodeDecodeError too
        return None


def _created_id(body: bytes) -> str | None:
    document = _json(body)
    created_id = document.get("id") if isinstance(document, dict) else None
    return created_id if isinstance(created_id, str) and len(created_id) <= MAX_OBJECT_ID else None


async def _record(scope: Scope, call: AuditCall, *, copy: bool = False) -> None:
    """``call`` in its tenant's log; ``copy``: in the log of the tenant it acted on, if that
    tenant is here (``AuditRepository.record_copy``: one arriving in a move is not yet)."""
    store: Store = scope["app"].state.store
    recording = store.audit.record_copy if copy else store.audit.record
    try:
        await run_in_threadpool(unguarded, recording, call)  # moves/guard.py
    except Exception:  # the answer is sent: a lost record is logged, never the caller's error
        log.exception(
            "could not record %s %s by key %s", call.method, call.route, call.caller.key_id
        )
