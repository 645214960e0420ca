"""The demand the schedules foretell: a tenant's own schedules, in a pool it may use; a
system admin's view of every tenant's (docs/autoscaling.md#forecast)."""

from __future__ import annotations

from herder.app.access import is_system_admin
from herder.domain.errors import NotFound
from herder.domain.forecast import Forecast, ForecastMinute
from herder.domain.models import Principal
from herder.store.forecast import ANY_POOL
from herder.store.store import Store


def read_forecast(store: Store, caller: Principal, pool: str | None, minutes: int) -> Forecast:
    """A pool the caller's tenant may not use does not exist for it (404), as another
    tenant's objects do; a system admin sees every tenant's schedules."""
    system = is_system_admin(caller)
    if pool is not None and not system and pool not in store.pools.usable(caller.tenant_id):
        raise NotFound(f"pool {pool[:64]} not found")
    demand = store.forecast.demand(
        minutes,
        pool=ANY_POOL if pool is None else pool,
        tenant_id=None if system else caller.tenant_id,
    )
    return Forecast(pool=pool, minutes=[ForecastMinute.of(minute) for minute in demand])
