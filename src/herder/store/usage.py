"""Time budgets and usage: tenants' budgets, what ended attempts are charged (one upsert per
batch of ended attempts, in the transaction that ends them), and what tenants used, read for
placement and ``/v1/usage`` (docs/budgets.md).

Charges are added up per (tenant, local day, pool, job, shard): the shard is the ending
attempt's worker's, so reports from different workers about one job never wait on one row.
"""

from __future__ import annotations

import functools
import zlib
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import BindParameter, Connection, Insert, and_, bindparam, func, select
from sqlalchemy.dialects import postgresql, sqlite

from herder.clock import Clock
from herder.domain.budgets import (
    DEFAULT_TIME_ZONE,
    Charged,
    Period,
    Running,
    TenantBudgets,
    TenantUse,
    Usage,
    earliest_day,
    ended_use,
    local_day,
)
from herder.domain.errors import NotFound
from herder.domain.states import AttemptState
from herder.store.database import Database
from herder.store.dialect import Among
from herder.store.history.live import live_floor
from herder.store.schema import attempts, runs, tenant_budgets, tenants, usage_charges

NO_POOL = ""  # usage_charges.pool of a run in no pool
SHARDS = 16  # rows per (tenant, day, pool, job): one per group of workers


_FLOOR: BindParameter[str] = bindparam("live_floor")


def returned_when_ended(dialect: str) -> tuple[Any, ...]:
    """What an ``UPDATE attempts … RETURNING`` that ends attempts returns for charging them:
    on PostgreSQL all ``charge_ended`` needs (its run's and tenant's facts as subqueries), so
    ending attempts reads nothing more to charge them; on SQLite, whose RETURNING takes no
    qualified names, the attempt's id, and the charge reads the rest."""
    return _ENDED_COLUMNS if dialect == "postgresql" else (attempts.c.id,)


def _ended_columns() -> tuple[Any, ...]:
    of_run = and_(runs.c.id == attempts.c.run_id, runs.c.id >= _FLOOR)
    tenant_id, pool, job_id = (
        select(column).where(of_run).correlate_except(runs).scalar_subquery()
        for column in (runs.c.tenant_id, runs.c.pool, runs.c.job_id)
    )
    time_zone = select(tenant_budgets.c.time_zone).where(tenant_budgets.c.tenant_id == tenant_id)
    return (
        *_ATTEMPT_CHARGED, tenant_id, pool, job_id, time_zone.scalar_subquery(),
    )  # fmt: skip


_ATTEMPT_CHARGED = (
    attempts.c.id, attempts.c.started_at, attempts.c.cpu_milli, attempts.c.gpus,
    attempts.c.worker_id, attempts.c.cpu_user_seconds, attempts.c.cpu_system_seconds,
)  # fmt: skip
_ENDED_COLUMNS = _ended_columns()
_ENDED = (  # SQLite's read of what it returned no more of than the ids
    select(*_ATTEMPT_CHARGED, runs.c.tenant_id, runs.c.pool, runs.c.job_id,
           tenant_budgets.c.time_zone)
    .join(runs, runs.c.id == attempts.c.run_id)
    .outerjoin(tenant_budgets, tenant_budgets.c.tenant_id == runs.c.tenant_id)
    .where(attempts.c.run_id >= _FLOOR, runs.c.id >= _FLOOR)
)  # fmt: skip
_ENDED_IDS = Among("sqlite", attempts.c.id, "attempt_ids")
_ENDED_BY_ID = _ENDED.where(_ENDED_IDS.condition)


def charge_ended(
    connection: Connection, returned: Sequence[Sequence[Any]], now: datetime, floor: str
) -> None:
    """Charge the attempts just ended (``now``), as ``returned_when_ended`` returned them,
    to their tenants: one upsert (on SQLite, a read first)."""
    if not returned:
        return
    ended = returned
    if connection.dialect.name != "postgresql":
        ended = []
        for params in _ENDED_IDS.batches(sorted(row[0] for row in returned), live_floor=floor):
            ended += connection.execute(_ENDED_BY_ID, params).all()
    charges: dict[tuple[str, str, str, str, int], list[float]] = defaultdict(lambda: [0, 0, 0])
    for row in ended:
        (
            _, started_at, cpu_milli, gpus, worker_id, cpu_user_seconds, cpu_system_seconds,
            tenant_id, pool, job_id, time_zone,
        ) = row  # fmt: skip
        measured = (
            None if cpu_user_seconds is None else cpu_user_seconds + (cpu_system_seconds or 0.0)
        )
        use = ended_use(measured, cpu_milli / 1000, gpus, started_at, now)
        day = local_day(now, ZoneInfo(time_zone or DEFAULT_TIME_ZONE)).isoformat()
        shard = zlib.crc32((worker_id or "").encode()) % SHARDS
        charge = charges[(tenant_id, day, pool or NO_POOL, job_id, shard)]
        charge[0] += use.cpu_seconds
        charge[1] += use.gpu_seconds
        charge[2] += 1
    rows = [
        {"tenant_id": tenant_id, "day": day, "pool": pool, "job_id": job_id, "shard": shard,
         "cpu_seconds": cpu, "gpu_seconds": gpu, "attempts": int(count)}
        for (tenant_id, day, pool, job_id, shard), (cpu, gpu, count) in sorted(charges.items())
    ]  # fmt: skip
    connection.execute(_upsert(connection.dialect.name), rows)


@functools.cache
def _upsert(dialect: str) -> Insert:
    """Adds a batch's charges to the rows they fall in."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(usage_charges)
    added = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=[
            usage_charges.c.tenant_id, usage_charges.c.day, usage_charges.c.pool,
            usage_charges.c.job_id, usage_charges.c.shard,
        ],
        set_={
            "cpu_seconds": usage_charges.c.cpu_seconds + added.cpu_seconds,
            "gpu_seconds": usage_charges.c.gpu_seconds + added.gpu_seconds,
            "attempts": usage_charges.c.attempts + added.attempts,
        },
    )  # fmt: skip


def _zones(connection: Connection, tenant_ids: Collection[str] | None) -> dict[str, TenantBudgets]:
    """The budgets (and time zones) of the tenants with any (of ``tenant_ids``, or all)."""
    query = select(tenant_budgets.c.tenant_id, tenant_budgets.c.time_zone, tenant_budgets.c.budgets)
    if tenant_ids is not None:
        if not tenant_ids:
            return {}
        query = query.where(tenant_budgets.c.tenant_id.in_(sorted(tenant_ids)))
    return {
        row.tenant_id: budgets_of(row.time_zone, row.budgets) for row in connection.execute(query)
    }


def budgets_of(time_zone: str, budgets: Any) -> TenantBudgets:
    """A tenant's budgets from its ``tenant_budgets`` row."""
    return TenantBudgets.model_validate({"time_zone": time_zone, "budgets": budgets})


def read_uses(
    connection: Connection, now: datetime, tenant_ids: Collection[str] | None
) -> dict[str, TenantUse]:
    """What the tenants with budgets (of ``tenant_ids``, or all) used: their charges since
    the first day of their budgets' periods and their running attempts."""
    return read_use_of(connection, now, _zones(connection, tenant_ids), None)


def read_use_of(
    connection: Connection, now: datetime, budgeted: Mapping[str, TenantBudgets],
    period: Period | None,
) -> dict[str, TenantUse]:  # fmt: skip
    """What the tenants of ``budgeted`` used since the first day of their budgets' periods
    and of ``period``, in each one's time zone (see ``read_uses``)."""
    if not budgeted:
        return {}
    first = {
        tenant_id: earliest_day(budgets, now, period) for tenant_id, budgets in budgeted.items()
    }
    charged: dict[str, list[Charged]] = defaultdict(list)
    rows = connection.execute(
        select(
            usage_charges.c.tenant_id, usage_charges.c.day, usage_charges.c.pool,
            usage_charges.c.job_id, func.sum(usage_charges.c.cpu_seconds).label("cpu"),
            func.sum(usage_charges.c.gpu_seconds).label("gpu"),
        )
        .where(
            usage_charges.c.tenant_id.in_(sorted(budgeted)),
            usage_charges.c.day >= min(first.values()).isoformat(),
        )
        .group_by(
            usage_charges.c.tenant_id, usage_charges.c.day, usage_charges.c.pool,
            usage_charges.c.job_id,
        )
    ).all()  # fmt: skip
    for row in rows:
        day = date.fromisoformat(row.day)
        if day >= first[row.tenant_id]:
            usage = Usage(float(row.cpu), float(row.gpu))
            charged[row.tenant_id].append(Charged(row.pool or None, row.job_id, day, usage))
    running: dict[str, list[Running]] = defaultdict(list)
    floor = live_floor(connection, now)
    for row in connection.execute(
        _RUNNING.where(runs.c.tenant_id.in_(sorted(budgeted))), {"live_floor": floor}
    ):
        running[row.tenant_id].append(
            Running(row.pool, row.job_id, row.cpu_milli / 1000, row.gpus, row.started_at)
        )
    return {
        tenant_id: TenantUse(budgets, tuple(charged[tenant_id]), tuple(running[tenant_id]))
        for tenant_id, budgets in budgeted.items()
    }


_RUNNING = (
    select(
        runs.c.tenant_id, runs.c.pool, runs.c.job_id, attempts.c.cpu_milli, attempts.c.gpus,
        attempts.c.started_at,
    )
    .join(runs, runs.c.id == attempts.c.run_id)
    .where(
        attempts.c.state == AttemptState.RUNNING,
        attempts.c.run_id >= _FLOOR,
        runs.c.id >= _FLOOR,
    )
)  # fmt: skip


def read_budgets(connection: Connection) -> dict[str, TenantBudgets]:
    """Every budgeted tenant's budgets (and time zone)."""
    return _zones(connection, None)


class UsageRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def set_budgets(self, tenant_id: str, budgets: TenantBudgets) -> TenantBudgets:
        """Replace a tenant's budgets and time zone; ``NotFound`` for no such tenant."""
        row = {
            "tenant_id": tenant_id,
            "time_zone": budgets.time_zone,
            "budgets": [budget.model_dump(mode="json") for budget in budgets.budgets],
            "updated_at": self._clock.now(),
        }
        insert = postgresql.insert if self._db.is_postgres else sqlite.insert
        statement = insert(tenant_budgets).values(**row)
        statement = statement.on_conflict_do_update(
            index_elements=[tenant_budgets.c.tenant_id],
            set_={key: statement.excluded[key] for key in row if key != "tenant_id"},
        )
        with self._db.write() as connection:
            known = connection.execute(select(tenants.c.id).where(tenants.c.id == tenant_id))
            if known.first() is None:
                raise NotFound(f"tenant {tenant_id} not found")
            connection.execute(statement)
        return budgets

    def budgets(self, tenant_id: str) -> TenantBudgets:
        """A tenant's budgets (none, in UTC, when never set)."""
        with self._db.read() as connection:
            return _zones(connection, [tenant_id]).get(tenant_id, TenantBudgets())

    def uses(
        self, tenant_ids: Sequence[str] | None, period: Period
    ) -> tuple[datetime, dict[str, TenantUse]]:
        """What tenants used (every tenant's, or those of ``tenant_ids``) in ``period`` and
        their budgets' periods, and the ``now`` it was read at; a tenant without budgets has
        none, in UTC."""
        now = self._clock.now()
        with self._db.read() as connection:
            query = select(tenants.c.id)
            if tenant_ids is not None:
                query = query.where(tenants.c.id.in_(sorted(tenant_ids)))
            known = list(connection.execute(query).scalars())
            budgeted = {tenant_id: TenantBudgets() for tenant_id in known}
            budgeted.update(_zones(connection, known))
            return now, read_use_of(connection, now, budgeted, period)
