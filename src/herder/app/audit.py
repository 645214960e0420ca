"""A tenant's audit log, for its admins; the system admins may read any tenant's."""

from __future__ import annotations

from datetime import datetime

from herder.app.access import check_tenant_admin
from herder.domain.audit import AuditEntry
from herder.domain.listings import PageRequest
from herder.domain.models import Page, Principal
from herder.store.audit import AuditFilter
from herder.store.store import Store


def list_entries(
    store: Store,
    caller: Principal,
    tenant_id: str | None,
    *,
    since: datetime | None,
    until: datetime | None,
    object_type: str | None,
    object_id: str | None,
    key_id: str | None,
    page: PageRequest,
) -> Page[AuditEntry]:
    """The entries of ``tenant_id`` (default: the caller's tenant), newest first."""
    tenant_id = tenant_id or caller.tenant_id
    check_tenant_admin(caller, tenant_id, "read its audit log")
    where = AuditFilter(
        since=since, until=until, object_type=object_type, object_id=object_id, key_id=key_id
    )
    return store.audit.list(tenant_id, where, page=page)
