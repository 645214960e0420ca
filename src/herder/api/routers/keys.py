"""/v1/keys: a tenant's API keys, for its admins (and the system admins, for any tenant).

Listing shows each key's name, role, creation, expiry, last use (to about a minute) and
revocation; never its secret. Revoking is idempotent: a revoked key is answered as it is.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, status

from herder.api.audit import acted_on
from herder.api.auth import Caller, StoreDep
from herder.api.openapi import problems
from herder.api.queries import OtherTenant, Paging
from herder.api.schemas import CreatedKey, KeyCreate
from herder.app import access, keys
from herder.domain.models import ApiKey, Page, Principal

router = APIRouter(prefix="/v1/keys", tags=["administration"])


@router.post("", status_code=status.HTTP_201_CREATED)
def create_key(body: KeyCreate, caller: Caller, store: StoreDep) -> CreatedKey:
    """A key for the caller's own tenant; the token in the answer is the only copy."""
    key, token = access.create_key(
        store, caller, caller.tenant_id, body.role, body.name, expires_at=body.expires_at
    )
    return CreatedKey.of(key, token)


@router.get("", responses=problems(404))
def list_keys(
    caller: Caller,
    store: StoreDep,
    page: Paging,
    tenant_id: OtherTenant = None,
) -> Page[ApiKey]:
    """The tenant's keys, newest first, revoked and expired ones included."""
    return keys.list_keys(store, caller, tenant_id, page=page)


@router.get("/current")
def current_key(caller: Caller) -> Principal:
    """The calling key: its tenant and role — what a client (the dashboard) may offer to do."""
    return caller


@router.get("/{key_id}", responses=problems(404))
def get_key(key_id: str, caller: Caller, store: StoreDep) -> ApiKey:
    return keys.read_key(store, caller, key_id)


@router.post("/{key_id}/revoke", responses=problems(404, 409))
def revoke_key(key_id: str, caller: Caller, store: StoreDep, request: Request) -> ApiKey:
    """Stop the key working: at once on this server, within 5 seconds on the others. 409 for
    the last live admin key of the system tenant, or of the caller's own tenant."""
    revoked = keys.revoke_key(store, caller, key_id)
    acted_on(request, revoked.tenant_id)
    return revoked
