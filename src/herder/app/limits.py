"""A limit's PATCH: some fields changed, the rest kept (``null`` clears an optional one),
merged inside the writing transaction (docs/flow-control.md)."""

from __future__ import annotations

from collections.abc import Mapping

from herder.domain.limits import Limit, LimitSpec
from herder.domain.patches import check_fields, patched
from herder.store.store import Store

FIELDS = frozenset(LimitSpec.model_fields)  # what a PATCH may change (not the name)


def update(
    store: Store,
    tenant_id: str,
    limit: str,
    changes: Mapping[str, object],
    *,
    if_version: frozenset[int] | None = None,
) -> Limit:
    """Change the given fields; the rest keep theirs. The merge happens inside the writing
    transaction, so a concurrent change is never lost."""
    check_fields(changes, FIELDS)

    def change(current: Limit) -> LimitSpec:
        return patched(LimitSpec, current.model_dump(mode="json", include=set(FIELDS)), changes)

    return store.limits.edit(tenant_id, limit, change, if_version=if_version)
