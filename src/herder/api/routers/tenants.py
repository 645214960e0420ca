"""/v1/tenants and /v1/worker-tokens: administration by the system tenant's admins."""

from __future__ import annotations

from fastapi import APIRouter, status

from herder.api.auth import Caller, StoreDep, SystemAdmin
from herder.api.schemas import CreatedSecret, KeyCreate, TenantCreate
from herder.domain.errors import Forbidden
from herder.domain.models import Role, Tenant

router = APIRouter(tags=["administration"])


@router.post("/v1/tenants", status_code=status.HTTP_201_CREATED)
def create_tenant(body: TenantCreate, _admin: SystemAdmin, store: StoreDep) -> Tenant:
    return store.access.create_tenant(body.name, weight=body.weight)


@router.post("/v1/tenants/{tenant_id}/keys", status_code=status.HTTP_201_CREATED)
def create_key(tenant_id: str, body: KeyCreate, caller: Caller, store: StoreDep) -> CreatedSecret:
    """An API key for a tenant: by the system admins, or by the tenant's own admins."""
    own_admin = caller.tenant_id == tenant_id and caller.role is Role.ADMIN
    if not (own_admin or (caller.is_system and caller.role is Role.ADMIN)):
        raise Forbidden("only the tenant's admins (or the system admins) may create its keys")
    key, token = store.access.create_api_key(tenant_id, body.role, body.name)
    return CreatedSecret(id=key.id, token=token)


@router.post("/v1/worker-tokens", status_code=status.HTTP_201_CREATED)
def create_worker_token(
    _admin: SystemAdmin, store: StoreDep, name: str = "worker"
) -> CreatedSecret:
    token = store.access.create_worker_token(name)
    return CreatedSecret(id=token.partition(".")[0], token=token)
