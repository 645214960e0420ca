"""What the overview reads: the live counts (few rows, by index) and the runs that ended in
a recent window, counted per minute and end state by the database.

The window is read over the runs' ``(tenant_id, finished_at)`` index, so its cost follows
the runs that ended in the window, not the history; the fleet's window reads it tenant by
tenant (one array of tenant ids), as PostgreSQL would otherwise scan every run.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, Connection, func, select

from herder.domain.states import LIVE_RUN_STATES, RunState
from herder.domain.stats import (
    OUTCOME_OF_STATE,
    ResourceTotals,
    Stats,
    failure_rate,
    throughput,
    totals,
    window_start,
)
from herder.domain.workflows.spec import NO_JOB_NAMES, TaskKind
from herder.store.autoscaling import summed_needs
from herder.store.database import Database
from herder.store.dialect import minute_of, one_of
from herder.store.gauges import fleet_capacity, fleet_used, workers_by_state
from herder.store.schema import runs, tenants

LIVE_STATES = [state for state in RunState if state in LIVE_RUN_STATES]  # in the enum's order


def read_stats(database: Database, tenant_id: str | None, now: datetime, minutes: int) -> Stats:
    """The tenant's overview, or the fleet's when ``tenant_id`` is None."""
    start = window_start(now, minutes)
    with database.read() as connection:
        scope = runs.c.tenant_id == tenant_id if tenant_id is not None else None
        tenants_ended = scope if scope is not None else _every_tenant(connection, database)
        series = throughput(_ended(connection, database, tenants_ended, start), start, minutes)
        ended = totals(series)
        fleet = tenant_id is None
        return Stats(
            scope="fleet" if fleet else "tenant",
            at=now,
            minutes=minutes,
            runs=_live(connection, scope),
            awaiting_approval=_awaiting_approval(connection, scope),
            throughput=series,
            ended=ended,
            failure_rate=failure_rate(ended),
            resources={
                "used": _tenant_used(connection, scope)
                if scope is not None
                else ResourceTotals(**fleet_used(connection)),
                "capacity": ResourceTotals(**fleet_capacity(connection)) if fleet else None,
            },
            workers=workers_by_state(connection) if fleet else None,
        )


def _live(connection: Connection, scope: ColumnElement[bool] | None) -> dict[str, int]:
    query = select(runs.c.state, func.count()).where(
        runs.c.state.in_([str(state) for state in LIVE_STATES])
    )
    if scope is not None:
        query = query.where(scope)
    found = {str(state): 0 for state in LIVE_STATES}
    found.update({state: n for state, n in connection.execute(query.group_by(runs.c.state))})
    return found


def _awaiting_approval(connection: Connection, scope: ColumnElement[bool] | None) -> int:
    """Approval tasks waiting for a person's decision."""
    query = select(func.count()).where(
        runs.c.state == RunState.WAITING, runs.c.job_name == TaskKind.APPROVAL.job_name
    )
    if scope is not None:
        query = query.where(scope)
    return int(connection.execute(query).scalar_one())


def _ended(
    connection: Connection,
    database: Database,
    scope: ColumnElement[bool],
    start: datetime,
) -> dict[tuple[datetime, RunState], int]:
    minute, read_minute = minute_of(database, runs.c.finished_at)
    query = select(minute, runs.c.state, func.count()).where(
        runs.c.finished_at >= start,
        runs.c.state.in_([str(state) for state in OUTCOME_OF_STATE]),
        runs.c.job_name.not_in(sorted(NO_JOB_NAMES)),  # a wait or a decision is no work done
        scope,
    )
    rows = connection.execute(query.group_by(minute, runs.c.state))
    return {(read_minute(at), RunState(state)): n for at, state, n in rows}


def _every_tenant(connection: Connection, database: Database) -> ColumnElement[bool]:
    ids = connection.execute(select(tenants.c.id)).scalars().all()
    return one_of(database, runs.c.tenant_id, ids)


def _tenant_used(connection: Connection, scope: ColumnElement[bool]) -> ResourceTotals:
    row = connection.execute(
        select(*summed_needs()).where(runs.c.state == RunState.RUNNING, scope)
    ).one()
    return ResourceTotals(cpu=row[0] / 1000, memory_mb=row[1], gpus=row[2], slots=row[3])
