"""The overview: a tenant sees its own runs; the system tenant's admins see the fleet."""

from __future__ import annotations

from herder.app.access import is_system_admin
from herder.domain.models import Principal
from herder.domain.stats import Stats
from herder.store.stats import read_stats
from herder.store.store import Store


def overview(store: Store, caller: Principal, minutes: int) -> Stats:
    tenant_id = None if is_system_admin(caller) else caller.tenant_id
    return read_stats(store.database, tenant_id, store.clock.now(), minutes)
