"""/v1/sessions: the sessions of a tenant's signed-in people (docs/tenants.md "Single
sign-on"), for its admins: listed (never a secret) and revoked — at once on this server,
within 5 seconds on the others. Another tenant's session is 404."""

from __future__ import annotations

from fastapi import APIRouter, Request

from herder.api.audit import acted_on
from herder.api.auth import Caller, StoreDep
from herder.api.openapi import problems
from herder.api.queries import Paging
from herder.domain.errors import Forbidden
from herder.domain.models import Page, Principal, Role
from herder.domain.sign_in import Session

router = APIRouter(prefix="/v1/sessions", tags=["administration"])


def _admin(caller: Principal) -> None:
    if caller.role is not Role.ADMIN:
        raise Forbidden("only an admin of the tenant may see or end its people's sessions")


@router.get("", responses=problems(403))
def list_sessions(caller: Caller, store: StoreDep, page: Paging) -> Page[Session]:
    """The tenant's sessions, newest first, ended ones included."""
    _admin(caller)
    return store.users.list(caller.tenant_id, page=page)


@router.post("/{session_id}/revoke", responses=problems(403, 404))
def revoke_session(session_id: str, caller: Caller, store: StoreDep, request: Request) -> Session:
    """End the session: its person must sign in again. Revoking again changes nothing."""
    _admin(caller)
    revoked = store.users.revoke(caller.tenant_id, session_id)
    acted_on(request, revoked.tenant_id)
    return revoked
