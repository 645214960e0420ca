"""Tenants and who may read them, create their keys, and see every tenant's queue.

The system tenant's admins administer every tenant; a tenant's own admins may read theirs and
create its keys; to anyone else another tenant does not exist (404, as every object of
another tenant).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from herder.domain.errors import Forbidden, NotFound
from herder.domain.keys import check_expiry
from herder.domain.listings import PageRequest
from herder.domain.models import ApiKey, Page, Principal, QueueEntry, Role, Tenant
from herder.domain.tenants import DefaultPoolChange
from herder.store.store import Store


def is_system_admin(caller: Principal) -> bool:
    return caller.is_system and caller.role is Role.ADMIN


def update_tenant(
    store: Store,
    tenant_id: str,
    *,
    weight: int | None,
    quota_changes: Mapping[str, object] | None,
    retention_days: int | None,
    default_pool: DefaultPoolChange | None = None,
) -> Tenant:
    """Each given quota replaces the stored one (``None``: unlimited); the rest stay.
    ``default_pool``, when given, is set first: a pool the tenant may not use refuses the
    whole change."""
    if default_pool is not None:
        store.access.set_default_pool(tenant_id, default_pool.pool)
    return store.access.update_tenant(
        tenant_id, weight=weight, quota_changes=quota_changes, retention_days=retention_days
    )


def read_tenant(store: Store, caller: Principal, tenant_id: str) -> Tenant:
    check_tenant_admin(caller, tenant_id, "read it")
    return store.access.get_tenant(tenant_id)


def create_key(
    store: Store,
    caller: Principal,
    tenant_id: str,
    role: Role,
    name: str,
    *,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """A new API key of ``tenant_id`` and its secret (the only copy)."""
    check_tenant_admin(caller, tenant_id, "create its keys")
    check_expiry(expires_at, store.clock.now())
    return store.access.create_api_key(tenant_id, role, name, expires_at=expires_at)


def list_queue(
    store: Store,
    caller: Principal,
    *,
    job_id: str | None,
    limit_id: str | None = None,
    key: str | None = None,
    page: PageRequest,
) -> Page[QueueEntry]:
    """The caller's tenant's queued runs; the system tenant's admins see every tenant's."""
    tenant_id = None if is_system_admin(caller) else caller.tenant_id
    return store.queue.list(tenant_id, job_id=job_id, limit_id=limit_id, key=key, page=page)


def check_tenant_admin(caller: Principal, tenant_id: str, what: str) -> None:
    if is_system_admin(caller):
        return
    if caller.tenant_id != tenant_id:
        raise NotFound(f"tenant {tenant_id} not found")
    if caller.role is not Role.ADMIN:
        raise Forbidden(f"only the tenant's admins (or the system admins) may {what}")
