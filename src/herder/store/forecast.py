"""The schedules' demand ahead (``domain.forecast``), read set-based: one grouped scan of the
schedules due in the window (with their jobs and tenants) makes a group per (tenant, job,
cron, zone, pool), counted; one read of each grouped job's last runs gives its expected
duration. The cost grows with the schedules due in the window (one index range, summed in
the database) and with the distinct groups and expressions (evaluated in Python), never
with a walk over the schedules themselves.

A schedule that starts a workflow is not in the forecast yet (docs/autoscaling.md)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Connection, Float, Integer, String, cast, func, select

from herder.clock import Clock, epoch_ms
from herder.domain.forecast import (
    MINUTE,
    MinuteDemand,
    ScheduleGroup,
    forecast,
    median_seconds,
)
from herder.domain.ids import id_bound
from herder.domain.placement.resources import Amount
from herder.domain.states import RunState
from herder.store.database import Database
from herder.store.schema import jobs, runs, schedules, tenants

RECENT_RUNS = 20  # a job's expected duration is the median of its last this many runs
RECENT_DAYS = 7  # and none older than this

ANY_POOL = "*"  # every pool's demand, not one pool's


class ForecastRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def demand(
        self, minutes: int, *, pool: str | None = ANY_POOL, tenant_id: str | None = None
    ) -> list[MinuteDemand]:
        with self._db.read() as connection:
            return pool_demand(
                connection, self._clock.now(), minutes, pool=pool, tenant_id=tenant_id
            )


def pool_demand(
    connection: Connection,
    now: datetime,
    minutes: int,
    *,
    pool: str | None = ANY_POOL,
    tenant_id: str | None = None,
) -> list[MinuteDemand]:
    """The demand of the schedules of pool ``pool`` (None: the shared fleet; ``ANY_POOL``:
    all), of one tenant or (None) all, minute by minute from ``now``'s minute."""
    end = now.replace(second=0, microsecond=0) + minutes * MINUTE
    groups = _groups(connection, end, pool, tenant_id)
    return forecast(groups, now, minutes)


def demand_by_pool(
    connection: Connection, now: datetime, minutes: int
) -> dict[str | None, list[MinuteDemand]]:
    """Every pool's demand (None: the shared fleet's), from one grouped read."""
    end = now.replace(second=0, microsecond=0) + minutes * MINUTE
    by_pool: dict[str | None, list[ScheduleGroup]] = defaultdict(list)
    for group in _groups(connection, end, ANY_POOL, None):
        by_pool[group.pool].append(group)
    return {pool: forecast(groups, now, minutes) for pool, groups in by_pool.items()}


def pool_busy(connection: Connection, pool: str, now: datetime, minutes: int) -> Sequence[Amount]:
    """What pool ``pool``'s schedules keep busy at most in each minute from now (the
    autoscaler's forecast)."""
    return [minute.busy for minute in pool_demand(connection, now, minutes, pool=pool)]


def _groups(
    connection: Connection, end: datetime, pool: str | None, tenant_id: str | None
) -> list[ScheduleGroup]:
    """Schedules counted per (tenant, job, cron, zone, pool override) first, over the
    schedules alone; only the groups then meet their jobs and tenants (pool, resources)."""
    spec = schedules.c.spec
    keys = (
        schedules.c.tenant_id.label("tenant_id"),
        schedules.c.job_id.label("job_id"),
        spec["cron"].as_string().label("cron"),
        func.coalesce(spec["timezone"].as_string(), "UTC").label("zone"),
        spec[("overrides", "pool")].as_string().label("override_pool"),
    )
    counted = (
        select(*keys, func.count().label("count"))
        .where(
            schedules.c.paused.is_(False),
            schedules.c.job_id.is_not(None),
            schedules.c.next_fire_at.is_not(None),
            schedules.c.next_fire_at < end,
        )
        .group_by(*keys)
    )
    if tenant_id is not None:
        counted = counted.where(schedules.c.tenant_id == tenant_id)
    grouped = counted.subquery()
    job = jobs.c.spec
    chosen_pool = func.coalesce(
        grouped.c.override_pool, job["pool"].as_string(), tenants.c.default_pool
    )
    query = select(
        grouped.c.tenant_id, grouped.c.job_id, grouped.c.cron, grouped.c.zone,
        cast(chosen_pool, String),
        func.coalesce(cast(job[("resources", "cpu")].as_float(), Float), 1.0),
        func.coalesce(cast(job[("resources", "memory_mb")].as_integer(), Integer), 256),
        func.coalesce(cast(job[("resources", "gpus")].as_integer(), Integer), 0),
        func.coalesce(cast(job["replicas"].as_integer(), Integer), 1),
        grouped.c.count,
    ).select_from(
        grouped.join(jobs, jobs.c.id == grouped.c.job_id).join(
            tenants, tenants.c.id == grouped.c.tenant_id
        )
    )  # fmt: skip
    # a tenant moving to another cell, or moved, fires here no more (its schedules keep
    # their next fire for the move's export): dropped by group, not by schedule, so that
    # the count over millions of schedules meets no other table
    query = query.where(tenants.c.move_state.is_(None))
    if pool is None:
        query = query.where(chosen_pool.is_(None))
    elif pool != ANY_POOL:
        query = query.where(chosen_pool == pool)
    rows = connection.execute(query).all()
    durations = _durations(connection, {(row[0], row[1]) for row in rows}, end)
    return [
        ScheduleGroup(
            cron=row[2],
            zone=row[3],
            pool=row[4],
            need=Amount(round(row[5] * 1000), row[6], row[7], 1).times(row[8]),
            duration_seconds=durations.get(row[1], median_seconds([])),
            count=row[9],
        )
        for row in rows
    ]


def _durations(
    connection: Connection, jobs_of: set[tuple[str, str]], now: datetime
) -> dict[str, float]:
    """Each job's median run time over its last ``RECENT_RUNS`` succeeded runs."""
    if not jobs_of:
        return {}
    since = id_bound("run", epoch_ms(now - timedelta(days=RECENT_DAYS)))
    order = func.row_number().over(partition_by=runs.c.job_id, order_by=runs.c.id.desc())
    recent = (
        select(runs.c.job_id, runs.c.started_at, runs.c.finished_at, order.label("n"))
        .where(
            runs.c.tenant_id.in_(sorted({tenant for tenant, _ in jobs_of})),
            runs.c.job_id.in_(sorted({job for _, job in jobs_of})),
            runs.c.id >= since,
            runs.c.state == RunState.SUCCEEDED,
            runs.c.started_at.is_not(None),
        )
        .subquery()
    )
    taken: dict[str, list[float]] = defaultdict(list)
    for job_id, started_at, finished_at in connection.execute(
        select(recent.c.job_id, recent.c.started_at, recent.c.finished_at).where(
            recent.c.n <= RECENT_RUNS
        )
    ):
        if finished_at is not None and started_at is not None:
            taken[job_id].append(max(0.0, (finished_at - started_at).total_seconds()))
    return {job_id: median_seconds(seconds) for job_id, seconds in taken.items()}
