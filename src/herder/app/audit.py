"""A tenant's audit log, for its admins; the system admins may read any tenant's."""

from __future__ import annotations

from herder.app.access import check_tenant_admin
from herder.app.actors import audit_with_names
from herder.domain.audit import AuditEntry, AuditFilter
from herder.domain.listings import PageRequest
from herder.domain.models import Page, Principal
from herder.store.store import Store


def list_entries(
    store: Store,
    caller: Principal,
    tenant_id: str | None,
    where: AuditFilter,
    *,
    page: PageRequest,
) -> Page[AuditEntry]:
    """The entries of ``tenant_id`` (default: the caller's tenant), newest first, each
    caller named as people know them now (a key's name, a signed-in person's)."""
    tenant_id = tenant_id or caller.tenant_id
    check_tenant_admin(caller, tenant_id, "read its audit log")
    return audit_with_names(store, tenant_id, store.audit.list(tenant_id, where, page=page))
