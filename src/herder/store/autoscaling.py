"""What a pool's autoscaling is decided on (``domain.autoscaling``): its workers and what
they run, the runs queued for it, and its forecast. A few grouped reads: the workers of a
pool (by their labels, against every pool's selector: pools are few), the attempts running
on them summed per worker, the queued runs whose pool is this one (their own, or their
tenant's default) summed once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, func, or_, select

from herder.domain.autoscaling import (
    AutoscalingSpec,
    PoolDemand,
    WorkerLoad,
    desired_workers,
)
from herder.domain.errors import NotFound
from herder.domain.placement.resources import Amount
from herder.domain.states import AttemptState, RunState
from herder.store.forecast import pool_busy
from herder.store.history.live import live_floor
from herder.store.pool_members import live_members
from herder.store.schema import attempts, pools, runs, tenants

# The forecast of a pool's scheduled demand, minute by minute from now, as busy amounts
# (slots: runs): the schedules' (``store.forecast``), or another in tests.
Forecast = Callable[[Connection, str, datetime, int], Sequence[Amount]]


@dataclass(frozen=True)
class PoolScaling:
    """One pool's autoscaling inputs and the count they ask for."""

    pool: str
    spec: AutoscalingSpec
    demand: PoolDemand
    workers: list[WorkerLoad]
    desired: int


def pool_scaling(
    connection: Connection, pool: str, now: datetime, forecast: Forecast = pool_busy
) -> PoolScaling:
    """The autoscaling of pool ``pool`` (its id or name): ``NotFound`` when there is no
    such pool or it has none."""
    row = connection.execute(
        select(pools.c.name, pools.c.autoscaling).where(
            or_(pools.c.id == pool, pools.c.name == pool)
        )
    ).first()
    if row is None:
        raise NotFound(f"pool {pool[:64]} not found")
    if row.autoscaling is None:
        raise NotFound(f"pool {row.name} has no autoscaling: PATCH it with an autoscaling policy")
    spec = AutoscalingSpec.model_validate(row.autoscaling)
    return _scaling(connection, row.name, spec, now, forecast)


def desired_by_pool(
    connection: Connection, now: datetime, forecast: Forecast = pool_busy
) -> dict[str, int]:
    """Each autoscaled pool's desired worker count (the ``herder_pool_desired_workers``
    gauge)."""
    found = {}
    for name, autoscaling in connection.execute(
        select(pools.c.name, pools.c.autoscaling).where(pools.c.autoscaling.is_not(None))
    ):
        if autoscaling is None:  # a JSON null
            continue
        spec = AutoscalingSpec.model_validate(autoscaling)
        found[name] = _scaling(connection, name, spec, now, forecast).desired
    return found


def _scaling(
    connection: Connection, name: str, spec: AutoscalingSpec, now: datetime, forecast: Forecast
) -> PoolScaling:
    members = live_members(connection).get(name, {})
    floor = live_floor(connection, now)
    loads, running = _running(connection, members, floor)
    minutes = int(spec.lead_seconds // 60) + 2
    demand = PoolDemand(
        running, _queued(connection, name, floor), forecast(connection, name, now, minutes)
    )
    return PoolScaling(name, spec, demand, loads, desired_workers(demand, spec.policy()))


def _running(
    connection: Connection, members: dict[str, bool], floor: str
) -> tuple[list[WorkerLoad], Amount]:
    if not members:
        return [], Amount()
    rows = connection.execute(
        select(
            attempts.c.worker_id, func.count(), func.sum(attempts.c.cpu_milli),
            func.sum(attempts.c.memory_mb), func.sum(attempts.c.gpus),
        )
        .where(
            attempts.c.state == AttemptState.RUNNING,
            attempts.c.run_id >= floor,
            attempts.c.worker_id.in_(sorted(members)),
        )
        .group_by(attempts.c.worker_id)
    ).all()  # fmt: skip
    counts = {row[0]: row[1] for row in rows}
    loads = [
        WorkerLoad(worker_id, counts.get(worker_id, 0), draining)
        for worker_id, draining in sorted(members.items())
    ]
    used = Amount(
        sum(int(row[2]) for row in rows), sum(int(row[3]) for row in rows),
        sum(int(row[4]) for row in rows), sum(int(row[1]) for row in rows),
    )  # fmt: skip
    return loads, used


def summed_needs() -> tuple[ColumnElement[Any], ...]:
    """What runs need (or, running, hold), summed, each times its replicas: millicores, MB,
    GPUs and slots; 0 for no run."""
    return tuple(
        func.coalesce(func.sum(need), 0)
        for need in (
            runs.c.cpu_milli * runs.c.replicas,
            runs.c.memory_mb * runs.c.replicas,
            runs.c.gpus * runs.c.replicas,
            runs.c.replicas,
        )
    )


def _queued(connection: Connection, name: str, floor: str) -> Amount:
    """What the runs queued for pool ``name`` need: their own pool, or none and their
    tenant's default."""
    row = connection.execute(
        select(*summed_needs())
        .select_from(runs.join(tenants, tenants.c.id == runs.c.tenant_id))
        .where(
            runs.c.state == RunState.QUEUED,
            runs.c.id >= floor,
            or_(
                runs.c.pool == name,
                and_(runs.c.pool.is_(None), tenants.c.default_pool == name),
            ),
        )
    ).one()
    return Amount(int(row[0]), int(row[1]), int(row[2]), int(row[3]))
