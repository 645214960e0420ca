"""Delayed runs started when their time comes (``RunState.SCHEDULED``, docs/flow-control.md
#delayed-runs): each batch one guarded statement — ``scheduled`` and due, so a run cancelled
meanwhile is not started and a second holder of the loop changes nothing — and the events of
what it moved, as cron fires are made."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, func, select, update

from herder.domain.lifecycle.changes import Event
from herder.domain.queue_room import QUEUED_WAITING
from herder.domain.states import RunState, check_transition
from herder.store.history.live import live_floor
from herder.store.runs.writes import record_events
from herder.store.schema import runs

STARTER = "starter"  # the actor of what the loop does
BATCH = 5_000  # runs one statement starts


def start_due(connection: Connection, now: datetime, batch: int = BATCH) -> int:
    """Queue up to ``batch`` delayed runs whose time has come, oldest start first; how many."""
    check_transition(RunState.SCHEDULED, RunState.QUEUED)
    floor = live_floor(connection, now)
    due = (
        select(runs.c.id)
        .where(runs.c.state == RunState.SCHEDULED, runs.c.run_at <= now, runs.c.id >= floor)
        .order_by(runs.c.run_at)
        .limit(batch)
        .scalar_subquery()
    )
    started = (
        connection.execute(
            update(runs)
            .where(runs.c.id.in_(due), runs.c.state == RunState.SCHEDULED)
            .values(state=RunState.QUEUED, queued_at=now, waiting_reason=QUEUED_WAITING)
            .returning(runs.c.id)
        )
        .scalars()
        .all()
    )
    record_events(
        connection,
        now,
        (
            Event(run_id, "its time came: queued", STARTER, source=RunState.SCHEDULED,
                  target=RunState.QUEUED)
            for run_id in started
        ),
    )  # fmt: skip
    return len(started)


def next_start(connection: Connection, now: datetime) -> datetime | None:
    """The earliest start of a delayed run, or wake of a waiting workflow task, if any."""
    floor = live_floor(connection, now)
    found: datetime | None = connection.execute(
        select(func.min(runs.c.run_at)).where(
            runs.c.state == RunState.SCHEDULED, runs.c.id >= floor
        )
    ).scalar_one()
    woken: datetime | None = connection.execute(
        select(func.min(runs.c.run_at)).where(runs.c.state == RunState.WAITING, runs.c.id >= floor)
    ).scalar_one()
    return min((moment for moment in (found, woken) if moment is not None), default=None)
