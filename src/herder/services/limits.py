"""A tenant's named limits (docs/flow-control.md): create, read, list, change some fields with
the rest kept (in one transaction), delete, and the keys with active runs."""

from __future__ import annotations

from collections.abc import Mapping

from herder.domain.limits import Limit, LimitKeyUsage, LimitSpec
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.services.patches import check_fields, patched
from herder.store.store import Store

FIELDS = frozenset(LimitSpec.model_fields)  # what a PATCH may change (not the name)


def create(store: Store, tenant_id: str, name: str, spec: LimitSpec) -> Limit:
    return store.limits.create(tenant_id, name, spec)


def list_limits(store: Store, tenant_id: str, *, page: PageRequest) -> Page[Limit]:
    return store.limits.list(tenant_id, page=page)


def read(store: Store, tenant_id: str, limit: str) -> Limit:
    return store.limits.get(tenant_id, limit)


def update(
    store: Store,
    tenant_id: str,
    limit: str,
    changes: Mapping[str, object],
    *,
    if_version: frozenset[int] | None = None,
) -> Limit:
    """Change the given fields; the rest keep theirs (``null`` clears an optional one). The
    merge happens inside the writing transaction, so a concurrent change is never lost."""
    check_fields(changes, FIELDS)

    def change(current: Limit) -> LimitSpec:
        return patched(LimitSpec, current.model_dump(mode="json", include=set(FIELDS)), changes)

    return store.limits.edit(tenant_id, limit, change, if_version=if_version)


def delete(store: Store, tenant_id: str, limit: str) -> None:
    """Refused (409 naming them) while jobs, schedules or workflows name it."""
    store.limits.delete(tenant_id, limit)


def keys(store: Store, tenant_id: str, limit: str, *, count: int) -> list[LimitKeyUsage]:
    return store.limits.keys(tenant_id, limit, count=count)
