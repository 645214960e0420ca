"""The one place a run moves on after its current attempt ended — whoever noticed the end
(the worker's report, the reaper finding a dead worker or a passed deadline).

A gang's attempt is one row per member: the run succeeds when every member has; the first
member to end otherwise stops the others and the run follows its retry policy. Preempted
attempts send the run back to the queue and do not count against its retries.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, select, update

from herder.domain.jobs import RetryPolicy
from herder.domain.retry import decide
from herder.domain.states import AttemptState, RunState
from herder.store.database import Database
from herder.store.notifications import DUE_CHANNEL, notify_cancel, notify_capacity, notify_work
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
    locked: Any = None,
) -> RunState:
    """Move the run from ``running`` per its retry policy once its attempt (every member of
    a gang) has ended; the row of the member that ended is already updated. ``locked`` is
    the run's row from ``lock_run`` when the caller has taken the lock already."""
    # Locked: two gang members ending at once must not both see the other still running.
    run = locked if locked is not None else lock_run(connection, run_id)
    if run.replicas > 1:
        if outcome is AttemptState.SUCCEEDED and _members_running(connection, run_id, attempt):
            return RunState.RUNNING
        if outcome is not AttemptState.SUCCEEDED:
            _stop_members(database, connection, run_id, attempt, f"{outcome}: {reason}", now)
    policy = RetryPolicy.model_validate(run.spec.get("retry", {}))
    # preempted attempts are not tries: retries count only the others
    decision = decide(outcome, reason, attempt - run.preemptions, policy, rng, exit_code)
    values: dict[str, object] = {"exit_code": exit_code, "reason": reason}
    if decision.state in (RunState.QUEUED, RunState.RETRY_WAIT):
        values["cancel_requested"] = False
    if outcome is AttemptState.PREEMPTED:
        values.update(
            preemptions=run.preemptions + 1,
            preempted_at=now,
            waiting_reason="preempted; waiting to be placed again",
        )
    if decision.state is RunState.QUEUED:
        notify_work(database, connection)
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


# what settling a run reads
RUN_FACTS = (runs.c.spec, runs.c.replicas, runs.c.preemptions, runs.c.cancel_requested)


def lock_run(connection: Connection, run_id: str) -> Any:
    """Take the run's row lock before touching its attempts: everyone who ends attempts locks
    in that order (run, then attempts), so gang members ending together cannot deadlock.
    Returns what ``run_after_attempt`` needs of the run."""
    return connection.execute(
        select(*RUN_FACTS).where(runs.c.id == run_id).with_for_update(key_share=True)
    ).one()


def lock_runs_of(connection: Connection, attempt_ids: Collection[str]) -> None:
    """Lock the runs of these attempts, in id order, before any of the attempts is touched:
    a batch that ends several attempts (or writes output before ending them) then takes its
    locks in the same order as everyone else."""
    if attempt_ids:
        owners = select(attempts.c.run_id).where(attempts.c.id.in_(attempt_ids))
        connection.execute(
            select(runs.c.id)
            .where(runs.c.id.in_(owners))
            .order_by(runs.c.id)
            .with_for_update(key_share=True)
        ).all()


def _members_running(connection: Connection, run_id: str, attempt: int) -> int:
    return int(
        connection.execute(
            select(func.count()).where(
                attempts.c.run_id == run_id,
                attempts.c.number == attempt,
                attempts.c.state == AttemptState.RUNNING,
            )
        ).scalar_one()
    )


def _stop_members(
    database: Database,
    connection: Connection,
    run_id: str,
    attempt: int,
    why: str,
    now: datetime,
) -> None:
    """A gang member ended badly: the others' attempts end too; their workers kill them."""
    stopped = connection.execute(
        update(attempts)
        .where(
            attempts.c.run_id == run_id,
            attempts.c.number == attempt,
            attempts.c.state == AttemptState.RUNNING,
        )
        .values(
            state=AttemptState.CANCELLED,
            reason=f"stopped with its gang: a member {why}",
            finished_at=now,
        )
        .returning(attempts.c.worker_id)
    ).all()
    for worker_id in {row.worker_id for row in stopped}:
        notify_cancel(database, connection, worker_id)


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
    run_id = connection.execute(
        select(attempts.c.run_id).where(attempts.c.id == attempt_id)
    ).scalar()
    if run_id is None:
        return
    locked = lock_run(connection, run_id)
    ended = connection.execute(
        update(attempts)
        .where(attempts.c.id == attempt_id, attempts.c.state == AttemptState.RUNNING)
        .values(state=outcome, reason=reason, finished_at=now)
        .returning(attempts.c.run_id, attempts.c.number, attempts.c.worker_id)
    ).first()
    if ended is None:
        return
    notify_capacity(database, connection, ended.worker_id)  # the dispatcher may place there
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
            exit_code=None, actor=actor, now=now, rng=rng, locked=locked,
        )  # fmt: skip
