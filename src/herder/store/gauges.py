"""What the metrics endpoint reads at each scrape: the live state of the queue and the fleet,
counted by the database, so every API process (and replica) reports the same numbers.

Each count is over rows the hot path keeps few (queued, running, alive) or over an index
(the dead-letter set by tenant and state); none scans the runs' history.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, case, func, select

from herder.domain.models import WorkerState
from herder.domain.queue_room import QUEUED_WAITING
from herder.domain.states import ACTIVE_RUN_STATES, AttemptState, RunState
from herder.domain.workflows.states import ACTIVE_WORKFLOW_RUN_STATES
from herder.store.autoscaling import desired_by_pool
from herder.store.database import Database
from herder.store.forecast import demand_by_pool
from herder.store.limit_gauges import LimitGauges, read_limit_gauges
from herder.store.schema import attempts, runs, tenants, workers, workflow_runs
from herder.store.usage import read_uses
from herder.telemetry.metrics import PRIORITY_NAMES

# A queued run's waiting reason (a sentence from ``domain.placement``) as one of a few kinds,
# by the first pattern it matches (SQL LIKE); any other, or none, is "other".
WAITING_KINDS = (
    ("not_seen", QUEUED_WAITING),
    ("budget", "tenant %budget% is spent%"),
    ("queue_quota", "tenant quota: only the tenant's first %"),
    ("pool", "%; pool % does not exist%"),
    ("pool", "%; tenant % may not use pool %"),
    ("share", "%; tenant % uses % in pool %"),
    ("limit", "%; limit %, key %: %"),
    ("limit", "debounced: %"),
    ("quota", "%; tenant quota %"),
    ("preempting", "%; preempting %"),
    ("preempting", "%; reclaiming its share in pool %"),
    ("preempting", "%; waiting for preempted runs to stop on %"),
    ("gang", "%a gang starts whole or not at all%"),
    ("no_workers", "%; no worker is available%"),
    ("labels", "%; none of % workers has %"),
    ("too_big", "%no worker that could take it is big enough%"),
    ("no_capacity", "% but none has room for %"),
)


@dataclass(frozen=True)
class Gauges:
    queued: dict[tuple[str, str, str], int]  # (tenant name, priority, waiting kind) → runs
    runs: dict[str, int]  # active run state → runs
    dead: dict[str, int]  # tenant name → runs in the dead-letter set
    workers: dict[str, int]  # worker state → workers
    capacity: dict[str, float]  # resource → offered by alive and draining workers
    used: dict[str, float]  # resource → taken by running attempts
    workflow_runs: dict[str, int]  # active workflow run state → workflow runs
    desired_workers: dict[str, int]  # autoscaled pool → the workers it should have
    # (pool, window) → runs the schedules start in the next window; (pool, resource, window)
    # → the most they keep busy at once in it. Pool "shared": the fleet in no pool.
    forecast_starting: dict[tuple[str, str], int]
    forecast_busy: dict[tuple[str, str, str], float]
    # (tenant name, period, pool or "", resource cpu|gpu) → (seconds used, limit)
    budgets: dict[tuple[str, str, str, str], tuple[float, float]] = field(default_factory=dict)
    limits: LimitGauges = field(default_factory=LimitGauges)


# A gauge for each state not yet ended, zero when no run is in it, in the enums' order.
GAUGED_RUN_STATES = [state for state in RunState if state in ACTIVE_RUN_STATES]
GAUGED_WORKFLOW_RUN_STATES = sorted(ACTIVE_WORKFLOW_RUN_STATES)


def read_gauges(database: Database, now: datetime) -> Gauges:
    with database.read() as connection:
        return Gauges(
            queued=_queued(connection),
            runs=_by_state(connection, GAUGED_RUN_STATES),
            dead=_dead(connection),
            workers=workers_by_state(connection),
            capacity=fleet_capacity(connection),
            used=fleet_used(connection),
            workflow_runs=_workflow_runs(connection),
            desired_workers=desired_by_pool(connection, now),
            **_forecast_cached(database.url, connection, now),
            budgets=_budgets(connection, now),
            limits=read_limit_gauges(connection),
        )


FORECAST_WINDOWS = {"5m": 5, "15m": 15, "60m": 60}
SHARED_FLEET = "shared"
FORECAST_KEPT_SECONDS = 30.0  # a scrape reads the schedules at most this often per process
_forecasts: dict[str, tuple[float, dict[str, Any]]] = {}  # database url → (read at, gauges)


def _forecast_cached(url: str, connection: Connection, now: datetime) -> dict[str, Any]:
    read_at, found = _forecasts.get(url, (-FORECAST_KEPT_SECONDS, {}))
    if time.monotonic() - read_at >= FORECAST_KEPT_SECONDS:
        found = _forecast(connection, now)
        _forecasts[url] = (time.monotonic(), found)
    return found


def _forecast(connection: Connection, now: datetime) -> dict[str, Any]:
    """The forecast gauges: the next hour, read once, summed over each window."""
    starting: dict[tuple[str, str], int] = {}
    busy: dict[tuple[str, str, str], float] = {}
    for pool, minutes in demand_by_pool(connection, now, max(FORECAST_WINDOWS.values())).items():
        name = pool or SHARED_FLEET
        for window, length in FORECAST_WINDOWS.items():
            ahead = minutes[:length]
            starting[(name, window)] = sum(minute.runs_starting for minute in ahead)
            for resource, value in (
                ("cpu", max(m.busy.cpu_milli for m in ahead) / 1000),
                ("memory_mb", float(max(m.busy.memory_mb for m in ahead))),
                ("gpus", float(max(m.busy.gpus for m in ahead))),
                ("runs", float(max(m.busy.slots for m in ahead))),
            ):
                busy[(name, resource, window)] = value
    return {"forecast_starting": starting, "forecast_busy": busy}


def _budgets(
    connection: Connection, now: datetime
) -> dict[tuple[str, str, str, str], tuple[float, float]]:
    """Each budget's use in its period so far against its limit (few: tenants' budgets)."""
    uses = read_uses(connection, now, None)
    if not uses:
        return {}
    rows = connection.execute(select(tenants.c.id, tenants.c.name).where(tenants.c.id.in_(uses)))
    names = {row.id: row.name for row in rows}
    found = {}
    for tenant_id, use in uses.items():
        for standing in use.standings(now):
            budget = standing.budget
            for resource, used, limit in (
                ("cpu", standing.used.cpu_seconds, budget.cpu_seconds),
                ("gpu", standing.used.gpu_seconds, budget.gpu_seconds),
            ):
                if limit is not None:
                    key = (names[tenant_id], str(budget.period), budget.pool or "", resource)
                    found[key] = (used, limit)
    return found


def _queued(connection: Connection) -> dict[tuple[str, str, str], int]:
    kind = case(
        *((runs.c.waiting_reason.like(pattern), name) for name, pattern in WAITING_KINDS),
        else_="other",
    )
    queued = (
        select(runs.c.tenant_id, runs.c.priority, kind.label("kind"))
        .where(runs.c.state == RunState.QUEUED)
        .subquery()
    )  # grouped outside: PostgreSQL would not see the CASE's parameters as the same twice
    rows = connection.execute(
        select(tenants.c.name, queued.c.priority, queued.c.kind, func.count())
        .join(tenants, tenants.c.id == queued.c.tenant_id)
        .group_by(tenants.c.name, queued.c.priority, queued.c.kind)
    )
    return {
        (name, PRIORITY_NAMES.get(priority, str(priority)), kind): n
        for name, priority, kind, n in rows
    }


def _by_state(connection: Connection, states: list[RunState]) -> dict[str, int]:
    found = {str(state): 0 for state in states}
    rows = connection.execute(
        select(runs.c.state, func.count())
        .where(runs.c.state.in_([str(state) for state in states]))
        .group_by(runs.c.state)
    )
    found.update({state: n for state, n in rows})
    return found


def _dead(connection: Connection) -> dict[str, int]:
    rows = connection.execute(
        select(tenants.c.name, func.count())
        .join(tenants, tenants.c.id == runs.c.tenant_id)
        .where(runs.c.state == RunState.DEAD)
        .group_by(tenants.c.name)
    )
    return {name: n for name, n in rows}


def workers_by_state(connection: Connection) -> dict[str, int]:
    found = {str(state): 0 for state in WorkerState}
    rows = connection.execute(select(workers.c.state, func.count()).group_by(workers.c.state))
    found.update({state: n for state, n in rows})
    return found


def fleet_capacity(connection: Connection) -> dict[str, float]:
    row = connection.execute(
        select(
            func.coalesce(func.sum(workers.c.cpu_milli), 0),
            func.coalesce(func.sum(workers.c.memory_mb), 0),
            func.coalesce(func.sum(workers.c.gpus), 0),
            func.coalesce(func.sum(workers.c.max_slots), 0),
        ).where(workers.c.state.in_([WorkerState.ALIVE, WorkerState.DRAINING]))
    ).one()
    return {"cpu": row[0] / 1000, "memory_mb": float(row[1]), "gpus": float(row[2]),
            "slots": float(row[3])}  # fmt: skip


def fleet_used(connection: Connection) -> dict[str, float]:
    row = connection.execute(
        select(
            func.coalesce(func.sum(attempts.c.cpu_milli), 0),
            func.coalesce(func.sum(attempts.c.memory_mb), 0),
            func.coalesce(func.sum(attempts.c.gpus), 0),
            func.count(),
        ).where(attempts.c.state == AttemptState.RUNNING)
    ).one()
    return {"cpu": row[0] / 1000, "memory_mb": float(row[1]), "gpus": float(row[2]),
            "slots": float(row[3])}  # fmt: skip


def _workflow_runs(connection: Connection) -> dict[str, int]:
    found = {str(state): 0 for state in GAUGED_WORKFLOW_RUN_STATES}
    rows = connection.execute(
        select(workflow_runs.c.state, func.count())
        .where(workflow_runs.c.state.in_(list(found)))
        .group_by(workflow_runs.c.state)
    )
    found.update({state: n for state, n in rows})
    return found
