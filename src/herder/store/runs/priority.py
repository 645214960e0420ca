"""A run's class as its starter chooses it (``domain.lifecycle.priority``): the tenant's
``max_priority`` read where a submission or a re-prioritisation needs it, and the guarded
change of a waiting run's class."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select, update

from herder.domain.errors import Conflict
from herder.domain.jobs import JobSpec, Priority
from herder.domain.lifecycle.priority import reprioritised
from herder.domain.states import RunState
from herder.domain.tenants import TenantQuotas
from herder.store.runs.writes import record_events
from herder.store.schema import runs, tenants


def max_priority(connection: Connection, tenant_id: str) -> Priority | None:
    quotas = connection.execute(
        select(tenants.c.quotas).where(tenants.c.id == tenant_id)
    ).scalar_one_or_none()
    return TenantQuotas.model_validate(quotas or {}).max_priority


def set_priority(
    connection: Connection, tenant_id: str, run_id: str, wanted: Priority, actor: str, now: datetime
) -> None:
    """Move the tenant's run ``run_id`` (which the caller found) to class ``wanted``, with an
    event; 409 for a run started or ended, or changed meanwhile."""
    row = connection.execute(
        select(runs.c.state, runs.c.spec).where(runs.c.id == run_id, runs.c.tenant_id == tenant_id)
    ).one()
    spec = JobSpec.model_validate(row.spec)
    state = RunState(row.state)
    event = reprioritised(
        run_id, state, spec.priority, wanted, max_priority(connection, tenant_id), actor
    )
    if event is None:
        return
    changed = connection.execute(
        update(runs)
        .where(
            runs.c.id == run_id,
            runs.c.state == state,
            runs.c.priority == spec.priority.rank,
        )
        .values(
            priority=wanted.rank,
            spec=spec.model_copy(update={"priority": wanted}).model_dump(mode="json"),
        )
    ).rowcount
    if not changed:
        raise Conflict(f"run {run_id} changed meanwhile; read it and try again", field="priority")
    record_events(connection, now, [event])
