"""A tenant's state in its move as a cell stores it (``tenants.move_state``, ``move_cell``):
read, and held for a shift (``app/moves.shift``); the shift written, with what it does to the
tenant's schedules; and every write of the tenant's own callers ordered against it
(``hold_at_home``).

The freeze and a schedule's fire are ordered by the firer's fence: the freeze touches each of
the tenant's schedules (``updated_at``) in its transaction, so a firer that read one before
the freeze advances nothing (its fence no longer holds), and one that reads after it finds
none due (``next_due_at`` cleared). So every instant before the exported ``next_fire_at``
fired here and none at or after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Connection, Update, select, update
from sqlalchemy.types import TypeEngine

from herder.domain.backfills import BackfillState
from herder.domain.errors import NotFound
from herder.domain.moves import MoveFacts, MoveState
from herder.domain.schedules import ScheduleSpec
from herder.store.dialect import update_rows
from herder.store.moves.copied import state_of
from herder.store.schedule_fires import next_fire_values
from herder.store.schema import backfills, pool_shares, pools, schedules, tenants
from herder.store.schema.base import ID
from herder.store.types import UtcDateTime

FENCE_STEP = timedelta(milliseconds=1)  # a stamp past one read, whatever the clock


@dataclass(frozen=True)
class MoveStatus:
    tenant_id: str
    state: MoveState | None
    cell: str | None


def status(connection: Connection, tenant_id: str) -> MoveStatus:
    found = status_if_here(connection, tenant_id)
    if found is None:
        raise NotFound(f"tenant {tenant_id[:64]} not found")
    return found


def status_if_here(connection: Connection, tenant_id: str) -> MoveStatus | None:
    row = connection.execute(
        select(tenants.c.move_state, tenants.c.move_cell).where(tenants.c.id == tenant_id)
    ).first()
    return None if row is None else MoveStatus(tenant_id, state_of(row.move_state), row.move_cell)


def held(connection: Connection, tenant_id: str) -> MoveFacts:
    """The tenant as a shift decides on it, its row held ``FOR UPDATE`` until the shift
    commits: the writes ``hold_at_home`` guards wait for it, and it for them."""
    row = connection.execute(
        select(tenants).where(tenants.c.id == tenant_id).with_for_update()
    ).first()
    if row is None:
        raise NotFound(f"tenant {tenant_id[:64]} not found")
    shares = connection.execute(
        select(pools.c.name)
        .join(pool_shares, pool_shares.c.pool_id == pools.c.id)
        .where(pool_shares.c.tenant_id == tenant_id)
    ).scalars()
    running = connection.execute(
        select(backfills.c.id)
        .where(backfills.c.tenant_id == tenant_id, backfills.c.state == BackfillState.RUNNING.value)
        .order_by(backfills.c.id)
    ).scalars()
    return MoveFacts(
        tenant_id,
        state_of(row.move_state),
        row.move_cell,
        row.is_system,
        (row.default_pool, *shares),
        tuple(running),
    )


def set_state(
    connection: Connection, tenant_id: str, state: MoveState | None, cell: str | None
) -> None:
    connection.execute(
        update(tenants)
        .where(tenants.c.id == tenant_id)
        .values(
            move_state=None if state is None else state.value,
            move_cell=None if state is None else cell,
        )
    )


def stop_schedules(connection: Connection, tenant_id: str, now: datetime) -> None:
    """Each of the tenant's schedules changed, their rows held: a firer's fence (the
    schedule's ``updated_at`` as it read it) no longer holds, whatever the clock says — the
    new stamp is past every one read; and none is due while the tenant is away (its
    ``next_due_at`` cleared, ``next_fire_at`` kept for the export), so the firers' reads by
    the index on (partition, next_due_at) never meet them."""
    stamps = connection.execute(
        select(schedules.c.updated_at).where(schedules.c.tenant_id == tenant_id).with_for_update()
    ).scalars()
    latest = max(stamps, default=None)
    stamp = now if latest is None or latest < now else latest + FENCE_STEP
    connection.execute(
        update(schedules)
        .where(schedules.c.tenant_id == tenant_id)
        .values(updated_at=stamp, next_due_at=None)
    )


def due_again(connection: Connection, tenant_id: str) -> None:
    """The tenant's schedules due again at their next fire (plus their jitter), as before
    it went away, in one statement on PostgreSQL (``update_rows``), each guarded by the next
    fire read: a paused one has no next fire, and stays as it is."""
    waiting = connection.execute(
        select(schedules.c.id, schedules.c.spec, schedules.c.next_fire_at).where(
            schedules.c.tenant_id == tenant_id, schedules.c.next_fire_at.is_not(None)
        )
    ).all()
    rows = []
    for schedule_id, spec, nominal in waiting:
        due = next_fire_values(schedule_id, ScheduleSpec.model_validate(spec), nominal)
        rows.append({"id": schedule_id, "read_fire_at": nominal, "due": due["next_due_at"]})
    update_rows(connection, _DUE_COLUMNS, rows, _due)


_DUE_COLUMNS: dict[str, TypeEngine[Any]] = {
    "id": ID,
    "read_fire_at": UtcDateTime(),
    "due": UtcDateTime(),
}


def _due(row: Mapping[str, ColumnElement[Any]]) -> Update:
    return (
        update(schedules)
        .where(schedules.c.id == row["id"], schedules.c.next_fire_at == row["read_fire_at"])
        .values(next_due_at=row["due"])
        .returning(schedules.c.id)
    )
