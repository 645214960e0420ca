"""The one place a run moves on after its current attempt ended — whoever noticed the end
(the worker's report, the reaper finding a dead worker or a passed deadline)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from sqlalchemy import Connection, select, update

from herder.domain.jobs import RetryPolicy
from herder.domain.retry import decide
from herder.domain.states import AttemptState, RunState
from herder.store.database import Database
from herder.store.notifications import DUE_CHANNEL
from herder.store.schema import attempts, runs
from herder.store.transitions import move_run


def run_after_attempt(
    database: Database,
    connection: Connection,
    run_id: str,
    attempt: int,
    outcome: AttemptState,
    reason: str,
    *,
    exit_code: int | None,
    actor: str,
    now: datetime,
    rng: random.Random,
) -> RunState:
    """Move the run from ``running`` per its retry policy; the attempt row is already ended."""
    spec = connection.execute(select(runs.c.spec).where(runs.c.id == run_id)).scalar_one()
    policy = RetryPolicy.model_validate(spec.get("retry", {}))
    decision = decide(outcome, reason, attempt, policy, rng, exit_code)
    values: dict[str, object] = {"exit_code": exit_code, "reason": reason}
    if decision.state in (RunState.QUEUED, RunState.RETRY_WAIT):
        values["cancel_requested"] = False
    if decision.retry_in_seconds is not None:
        values["retry_at"] = now + timedelta(seconds=decision.retry_in_seconds)
        database.notify(connection, DUE_CHANNEL)
    move_run(
        connection,
        run_id,
        RunState.RUNNING,
        decision.state,
        now,
        actor=actor,
        attempt=attempt,
        message=decision.message,
        **values,
    )
    return decision.state


def end_attempt(
    database: Database,
    connection: Connection,
    rng: random.Random,
    actor: str,
    attempt_id: str,
    outcome: AttemptState,
    reason: str,
    now: datetime,
) -> None:
    """End a running attempt for its worker (who cannot or did not), and move its run on if
    it was the run's current attempt."""
    ended = connection.execute(
        update(attempts)
        .where(attempts.c.id == attempt_id, attempts.c.state == AttemptState.RUNNING)
        .values(state=outcome, reason=reason, finished_at=now)
        .returning(attempts.c.run_id, attempts.c.number)
    ).first()
    if ended is None:
        return
    current = connection.execute(
        select(runs.c.id).where(
            runs.c.id == ended.run_id,
            runs.c.state == RunState.RUNNING,
            runs.c.attempt_count == ended.number,
        )
    ).scalar()
    if current is not None:
        run_after_attempt(
            database, connection, ended.run_id, ended.number, outcome, reason,
            exit_code=None, actor=actor, now=now, rng=rng,
        )  # fmt: skip
