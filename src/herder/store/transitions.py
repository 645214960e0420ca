"""Every state change of a run is one conditional update plus its event row.

The update is guarded by the state (and, for attempts, the attempt number) it expects, so a
stale or concurrent change finds no row and reports ``False`` instead of overwriting.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, update

from herder.domain.states import RunState, check_transition
from herder.store.schema import run_events, runs


def record_event(
    connection: Connection,
    run_id: str,
    at: datetime,
    *,
    actor: str,
    message: str,
    from_state: RunState | None = None,
    to_state: RunState | None = None,
    attempt: int | None = None,
) -> None:
    connection.execute(
        insert(run_events).values(
            run_id=run_id,
            at=at,
            from_state=from_state,
            to_state=to_state,
            attempt=attempt,
            actor=actor,
            message=message,
        )
    )


def move_run(
    connection: Connection,
    run_id: str,
    source: RunState,
    target: RunState,
    at: datetime,
    *,
    actor: str,
    message: str,
    attempt: int | None = None,
    **values: Any,
) -> bool:
    """``source → target`` if the run is still in ``source`` (and at ``attempt``, if given)."""
    check_transition(source, target)
    statement = update(runs).where(runs.c.id == run_id, runs.c.state == source)
    if attempt is not None:
        statement = statement.where(runs.c.attempt_count == attempt)
    if target.is_terminal:
        values.setdefault("finished_at", at)
    if target is RunState.QUEUED:
        values.setdefault("queued_at", at)
    if source is RunState.QUEUED:  # a waiting reason is about waiting in the queue
        values.setdefault("waiting_reason", None)
    moved = connection.execute(statement.values(state=target, **values)).rowcount == 1
    if moved:
        record_event(
            connection,
            run_id,
            at,
            actor=actor,
            message=message,
            from_state=source,
            to_state=target,
            attempt=attempt,
        )
    return moved
