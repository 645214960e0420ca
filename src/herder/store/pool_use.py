"""What each tenant runs in each pool now: its attempts running on the pool's workers, and
how many of them borrow (``attempts.borrowed``), in one grouped query for the pools listed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from sqlalchemy import Connection, func, select

from herder.domain.pools import PoolUse
from herder.domain.states import AttemptState
from herder.store.schema import attempts, runs


def pool_use(
    connection: Connection, members: Mapping[str, Mapping[str, bool]], floor: str
) -> dict[str, list[PoolUse]]:
    """Pool name → each tenant's use of it (by tenant id); ``members``: each pool's live
    workers, ``floor``: the smallest id a live run can have."""
    pool_of = {worker: name for name, workers in members.items() for worker in workers}
    if not pool_of:
        return {}
    rows = connection.execute(
        select(
            attempts.c.worker_id, runs.c.tenant_id, attempts.c.borrowed,
            func.count().label("attempts"),
            func.coalesce(func.sum(attempts.c.cpu_milli), 0).label("cpu_milli"),
            func.coalesce(func.sum(attempts.c.memory_mb), 0).label("memory_mb"),
            func.coalesce(func.sum(attempts.c.gpus), 0).label("gpus"),
        )
        .select_from(attempts.join(runs, runs.c.id == attempts.c.run_id))
        .where(
            attempts.c.state == AttemptState.RUNNING,
            attempts.c.run_id >= floor,
            attempts.c.worker_id.in_(sorted(pool_of)),
        )
        .group_by(attempts.c.worker_id, runs.c.tenant_id, attempts.c.borrowed)
    )  # fmt: skip
    totals: dict[tuple[str, str], Counter[str]] = {}
    for row in rows:
        total = totals.setdefault((pool_of[row.worker_id], row.tenant_id), Counter())
        total.update(
            attempts=row.attempts, borrowed=row.attempts if row.borrowed else 0,
            cpu_milli=int(row.cpu_milli), memory_mb=int(row.memory_mb), gpus=int(row.gpus),
        )  # fmt: skip
    found: dict[str, list[PoolUse]] = {}
    for (pool, tenant_id), total in sorted(totals.items()):
        found.setdefault(pool, []).append(
            PoolUse(tenant_id=tenant_id, attempts=total["attempts"], borrowed=total["borrowed"],
                    cpu=total["cpu_milli"] / 1000, memory_mb=total["memory_mb"],
                    gpus=total["gpus"])
        )  # fmt: skip
    return found
