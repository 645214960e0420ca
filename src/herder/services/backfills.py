"""A schedule's past nominal times, run a few at a time; the store starts and moves them."""

from __future__ import annotations

from herder.domain.backfills import Backfill, BackfillRequest
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.store.store import Store


def create(store: Store, tenant_id: str, schedule_id: str, request: BackfillRequest) -> Backfill:
    return store.backfills.create(tenant_id, schedule_id, request)


def list_backfills(
    store: Store, tenant_id: str, schedule_id: str, *, page: PageRequest
) -> Page[Backfill]:
    return store.backfills.list(tenant_id, schedule_id, page=page)


def read(store: Store, tenant_id: str, backfill_id: str) -> Backfill:
    return store.backfills.get(tenant_id, backfill_id)


def cancel(store: Store, tenant_id: str, backfill_id: str) -> Backfill:
    """No more starts; runs already started go on."""
    return store.backfills.cancel(tenant_id, backfill_id)
