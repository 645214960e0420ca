"""Resource pools as their readers see them: the system admins whole, every tenant that may
use one only its own share of it. A pool a tenant has no share in does not exist for it
(404), as every object of another tenant."""

from __future__ import annotations

from herder.app.access import is_system_admin
from herder.domain.autoscaling import Demand, PoolAutoscaling, ScaledWorker, forecast_peak
from herder.domain.listings import PageRequest
from herder.domain.models import Page, Principal
from herder.domain.pools import Pool
from herder.store.store import Store


def list_pools(
    store: Store,
    caller: Principal,
    *,
    usable: bool,
    page: PageRequest,
) -> Page[Pool]:
    """Newest first: every pool for a system admin (unless ``usable``), else those the
    caller's tenant may use."""
    if is_system_admin(caller) and not usable:
        return store.pools.list(page=page)
    listed = store.pools.list(tenant_id=caller.tenant_id, page=page)
    return listed.model_copy(update={"items": [_as_seen_by(caller, pool) for pool in listed.items]})


def read_pool(store: Store, caller: Principal, pool: str) -> Pool:
    if is_system_admin(caller):
        return store.pools.get(pool)
    return _as_seen_by(caller, store.pools.get(pool, tenant_id=caller.tenant_id))


def read_autoscaling(store: Store, pool: str) -> PoolAutoscaling:
    scaling = store.pools.autoscaling(pool)
    policy = scaling.spec.policy()
    return PoolAutoscaling(
        pool=scaling.pool,
        desired_workers=scaling.desired,
        workers=[
            ScaledWorker(id=worker.id, running=worker.running, draining=worker.draining)
            for worker in scaling.workers
        ],
        running=Demand.of(scaling.demand.running),
        queued=Demand.of(scaling.demand.queued),
        forecast_peak=Demand.of(forecast_peak(scaling.demand, policy)),
        autoscaling=scaling.spec,
    )


def _as_seen_by(caller: Principal, pool: Pool) -> Pool:
    """Another tenant's share and use of a pool are that tenant's business: only the
    caller's show."""
    own = [share for share in pool.shares if share.tenant_id == caller.tenant_id]
    used = [use for use in pool.in_use if use.tenant_id == caller.tenant_id]
    return pool.model_copy(update={"shares": own, "in_use": used})
