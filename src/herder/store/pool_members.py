"""Which live workers are in which pool: a worker's labels against every pool's selector
(``domain.pools.PoolSelectors``). Pools are few, made by hand, so all are read; every live
worker's labels are read too, which suits the admin reads and the autoscaler's look, not a
per-run path."""

from __future__ import annotations

from sqlalchemy import Connection, select

from herder.domain.models import WorkerState
from herder.domain.pools import PoolSelectors, selector_of
from herder.store.schema import pools, workers


def live_members(connection: Connection) -> dict[str, dict[str, bool]]:
    """Each pool's alive and draining workers: pool name → worker id → draining."""
    selectors = PoolSelectors(
        (row.name, selector_of(row.name, row.selector))
        for row in connection.execute(select(pools.c.name, pools.c.selector))
    )
    members: dict[str, dict[str, bool]] = {}
    if not selectors:
        return members
    for row in connection.execute(
        select(workers.c.id, workers.c.labels, workers.c.state).where(
            workers.c.state.in_([WorkerState.ALIVE, WorkerState.DRAINING])
        )
    ):
        name = selectors.pool_of(row.labels or {})
        if name is not None:
            members.setdefault(name, {})[row.id] = row.state == WorkerState.DRAINING
    return members
