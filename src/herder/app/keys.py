"""A tenant's admins list, read and revoke its keys; the system admins any tenant's. To
anyone else another tenant's key does not exist (404); a non-admin is refused (403) before
anything is looked up."""

from __future__ import annotations

from herder.app.access import check_tenant_admin, is_system_admin
from herder.domain.errors import Forbidden, NotFound
from herder.domain.listings import PageRequest
from herder.domain.models import ApiKey, Page, Principal, Role
from herder.store.store import Store


def list_keys(
    store: Store,
    caller: Principal,
    tenant_id: str | None,
    *,
    page: PageRequest,
) -> Page[ApiKey]:
    """The keys of ``tenant_id`` (default: the caller's tenant)."""
    tenant_id = tenant_id or caller.tenant_id
    check_tenant_admin(caller, tenant_id, "list its keys")
    return store.keys.list(tenant_id, page=page)


def read_key(store: Store, caller: Principal, key_id: str) -> ApiKey:
    _require_admin(caller)
    key = store.keys.get(key_id)
    if key.tenant_id != caller.tenant_id and not is_system_admin(caller):
        raise NotFound(f"API key {key_id} not found")
    return key


def revoke_key(store: Store, caller: Principal, key_id: str) -> ApiKey:
    """Revoke a key: it stops working at once in this process and within seconds in every
    other (their recent-keys caches). A key already revoked is answered as it is."""
    key = read_key(store, caller, key_id)
    outside = key.tenant_id != caller.tenant_id
    return store.keys.revoke(key.tenant_id, key_id, by_outside_admin=outside)


def _require_admin(caller: Principal) -> None:
    if caller.role is not Role.ADMIN:
        raise Forbidden("only the tenant's admins (or the system admins) may manage its keys")
