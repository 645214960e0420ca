"""A tenant's triggers (docs/events.md): create, read, list, change some fields with the
rest kept (in one transaction), delete."""

from __future__ import annotations

from collections.abc import Mapping

from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.domain.patches import check_fields, patched
from herder.domain.triggers import Trigger, TriggerSpec
from herder.store.store import Store

FIELDS = frozenset(TriggerSpec.model_fields)  # what a PATCH may change (not the name)


def create(store: Store, tenant_id: str, name: str, spec: TriggerSpec) -> Trigger:
    return store.triggers.create(tenant_id, name, spec)


def list_triggers(store: Store, tenant_id: str, *, page: PageRequest) -> Page[Trigger]:
    return store.triggers.list(tenant_id, page=page)


def read(store: Store, tenant_id: str, trigger: str) -> Trigger:
    return store.triggers.get(tenant_id, trigger)


def update(
    store: Store,
    tenant_id: str,
    trigger: str,
    changes: Mapping[str, object],
    *,
    if_version: frozenset[int] | None = None,
) -> Trigger:
    check_fields(changes, FIELDS)

    def change(current: Trigger) -> TriggerSpec:
        stored = current.model_dump(mode="json", include=set(FIELDS))
        return patched(TriggerSpec, stored, changes)

    return store.triggers.edit(tenant_id, trigger, change, if_version=if_version)


def delete(store: Store, tenant_id: str, trigger: str) -> None:
    store.triggers.delete(tenant_id, trigger)
