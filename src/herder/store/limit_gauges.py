"""The limits' gauges, read at each scrape (docs/metrics.md): each limit's runs running and
waiting, and the same for its few busiest keys only — a million keys would be a million
series, so the rest are counted in their limit's total and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, func, select

from herder.domain.states import RunState
from herder.store.dialect import Among
from herder.store.schema import limits, run_limit_keys, runs, tenants

TOP_KEYS = 5  # keys per limit with gauges of their own
GAUGED_LIMIT_STATES = (RunState.RUNNING, RunState.QUEUED)


@dataclass(frozen=True)
class LimitGauges:
    # (tenant name, limit name, state) → runs
    runs: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # (tenant name, limit name, key, state) → runs, for each limit's busiest keys
    key_runs: dict[tuple[str, str, str, str], int] = field(default_factory=dict)


def read_limit_gauges(connection: Connection) -> LimitGauges:
    active = (
        select(run_limit_keys.c.limit_id, run_limit_keys.c.key, runs.c.state)
        .join(runs, runs.c.id == run_limit_keys.c.run_id)
        .where(runs.c.state.in_([str(state) for state in GAUGED_LIMIT_STATES]))
        .subquery()
    )
    per_key = (
        select(
            active.c.limit_id,
            active.c.key,
            active.c.state,
            func.count().label("count"),
        )
        .group_by(active.c.limit_id, active.c.key, active.c.state)
        .subquery()
    )
    totals = select(per_key.c.limit_id, per_key.c.state, func.sum(per_key.c.count)).group_by(
        per_key.c.limit_id, per_key.c.state
    )
    counted = [
        (limit_id, state, int(count)) for limit_id, state, count in connection.execute(totals)
    ]
    names = _names(connection, sorted({limit_id for limit_id, _, _ in counted}))
    found = LimitGauges()
    for limit_id, state, count in counted:
        if limit_id in names:
            found.runs[(*names[limit_id], state)] = count
    busiest = (
        select(
            per_key.c.limit_id,
            per_key.c.key,
            func.sum(per_key.c.count).label("count"),
            func.row_number()
            .over(
                partition_by=per_key.c.limit_id,
                order_by=(func.sum(per_key.c.count).desc(), per_key.c.key),
            )
            .label("rank"),
        )
        .group_by(per_key.c.limit_id, per_key.c.key)
        .subquery()
    )
    top = (
        select(per_key.c.limit_id, per_key.c.key, per_key.c.state, per_key.c.count)
        .join(
            busiest,
            (busiest.c.limit_id == per_key.c.limit_id) & (busiest.c.key == per_key.c.key),
        )
        .where(busiest.c.rank <= TOP_KEYS)
    )
    for limit_id, key, state, count in connection.execute(top):
        if limit_id in names:
            found.key_runs[(*names[limit_id], key, state)] = int(count)
    return found


def _names(connection: Connection, limit_ids: list[str]) -> dict[str, tuple[str, str]]:
    """Limit id → (tenant name, limit name), for the limits with active runs only."""
    among = Among(connection.dialect.name, limits.c.id, "limit_ids")
    named = (
        select(limits.c.id, tenants.c.name, limits.c.name)
        .join(tenants, tenants.c.id == limits.c.tenant_id)
        .where(among.condition)
    )
    found = {}
    for params in among.batches(limit_ids):
        for limit_id, tenant, limit in connection.execute(named, params):
            found[limit_id] = (tenant, limit)
    return found
