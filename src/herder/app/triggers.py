"""A trigger's fields changed, the rest kept, in one transaction (docs/events.md); which
triggers an event starts is ``app.events``'."""

from __future__ import annotations

from collections.abc import Mapping

from herder.domain.patches import check_fields, patched
from herder.domain.triggers import Trigger, TriggerSpec
from herder.store.store import Store

FIELDS = frozenset(TriggerSpec.model_fields)  # what a PATCH may change (not the name)


def update_trigger(
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
