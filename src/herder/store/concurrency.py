"""A schedule's concurrency policy, shared by its fires and by manual runs that ask for it:
which of its runs are active, and replacing one (cancel it, say why)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from herder.domain.states import TERMINAL_RUN_STATES, AttemptState, RunState
from herder.store.database import Database
from herder.store.notifications import notify_cancel
from herder.store.schema import attempts, runs, schedule_events
from herder.store.transitions import move_run, record_event

ACTIVE = [str(state) for state in RunState if state not in TERMINAL_RUN_STATES]


def active_runs(connection: Connection, schedule_id: str) -> list[Any]:
    return list(
        connection.execute(
            select(runs.c.id, runs.c.state).where(
                runs.c.schedule_id == schedule_id, runs.c.state.in_(ACTIVE)
            )
        ).all()
    )


def cancel_for_replacement(
    database: Database,
    connection: Connection,
    schedule_id: str,
    run_id: str,
    state: RunState,
    now: datetime,
) -> None:
    """End a run a newer one of its schedule replaces: at once if not yet running, else by
    asking its worker (which hears of it through a notice)."""
    message = f"replaced by a newer run of schedule {schedule_id}"
    if state is RunState.RUNNING:
        connection.execute(
            update(runs)
            .where(runs.c.id == run_id, runs.c.state == RunState.RUNNING)
            .values(cancel_requested=True)
        )
        record_event(connection, run_id, now, actor="scheduler", message=message)
        worker_id = connection.execute(
            select(attempts.c.worker_id).where(
                attempts.c.run_id == run_id, attempts.c.state == AttemptState.RUNNING
            )
        ).scalar()
        if worker_id is not None:
            notify_cancel(database, connection, worker_id)
    else:
        move_run(
            connection, run_id, state, RunState.CANCELLED, now,
            actor="scheduler", message=message, reason="cancelled: " + message,
        )  # fmt: skip
    schedule_event(connection, schedule_id, now, "replaced", message, run_id=run_id)


def schedule_event(
    connection: Connection,
    schedule_id: str,
    at: datetime,
    kind: str,
    message: str,
    *,
    scheduled_for: datetime | None = None,
    run_id: str | None = None,
) -> None:
    connection.execute(
        insert(schedule_events).values(
            schedule_id=schedule_id,
            at=at,
            kind=kind,
            message=message,
            scheduled_for=scheduled_for,
            run_id=run_id,
        )
    )
