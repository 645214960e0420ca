"""/v1/tenants and /v1/worker-tokens: administration by the system tenant's admins.

A tenant's own admins may read their tenant (its weight and quotas) and create its keys
(listed and revoked under ``/v1/keys``); another tenant answers 404 to them, as every
object of another tenant does.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, status

from herder.api.auth import Caller, StoreDep, SystemAdmin
from herder.api.openapi import problems
from herder.api.queries import Paging
from herder.api.ratelimit import submit_limiter
from herder.api.schemas import CreatedKey, CreatedSecret, KeyCreate, TenantCreate, TenantUpdate
from herder.app import access
from herder.domain.models import Page, Tenant

router = APIRouter(tags=["administration"])


@router.post("/v1/tenants", status_code=status.HTTP_201_CREATED, responses=problems(409))
def create_tenant(body: TenantCreate, _admin: SystemAdmin, store: StoreDep) -> Tenant:
    return store.access.create_tenant(body.name, weight=body.weight, quotas=body.quotas)


@router.get("/v1/tenants")
def list_tenants(
    _admin: SystemAdmin,
    store: StoreDep,
    page: Paging,
) -> Page[Tenant]:
    """Every tenant, newest first."""
    return store.access.list_tenants(page=page)


@router.get("/v1/tenants/{tenant_id}")
def get_tenant(tenant_id: str, caller: Caller, store: StoreDep) -> Tenant:
    return access.read_tenant(store, caller, tenant_id)


@router.patch("/v1/tenants/{tenant_id}")
def update_tenant(
    tenant_id: str, body: TenantUpdate, _admin: SystemAdmin, store: StoreDep, request: Request
) -> Tenant:
    """Change the fair-share weight, quotas, retention and default pool (one the tenant has
    a share in, else 422 naming ``default_pool``). Usage quotas apply from the
    dispatcher's next pass; a submit rate within a few seconds on every API replica; a
    shorter retention hides older runs at once and removes them at the next maintenance."""
    tenant = access.update_tenant(
        store,
        tenant_id,
        weight=body.weight,
        quota_changes=body.quota_changes(),
        retention_days=body.retention_days,
        default_pool=body.default_pool_change(),
    )
    submit_limiter(request).quotas_changed(tenant_id)
    return tenant


@router.post("/v1/tenants/{tenant_id}/keys", status_code=status.HTTP_201_CREATED)
def create_key(tenant_id: str, body: KeyCreate, caller: Caller, store: StoreDep) -> CreatedKey:
    """An API key for a tenant: by the system admins, or by the tenant's own admins."""
    key, token = access.create_key(
        store, caller, tenant_id, body.role, body.name, expires_at=body.expires_at
    )
    return CreatedKey.of(key, token)


@router.post("/v1/worker-tokens", status_code=status.HTTP_201_CREATED)
def create_worker_token(
    _admin: SystemAdmin, store: StoreDep, name: str = "worker"
) -> CreatedSecret:
    token = store.access.create_worker_token(name)  # the only copy; its id is its first part
    return CreatedSecret(id=token.partition(".")[0], token=token)
