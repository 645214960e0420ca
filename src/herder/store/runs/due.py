"""What has become due, read inside the reaper's unit of work: workers silent too long and
the attempts they ran, attempts past their deadline, retries whose back-off is over, queued
(or held) runs past their start deadline — and when the next of these falls due."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select, update

from herder.domain.lifecycle.facts import AttemptFacts, DueRetry, WorkerSilence
from herder.domain.models import WorkerState
from herder.domain.states import AttemptState, RunState
from herder.store.history.live import live_floor
from herder.store.runs.facts import ATTEMPT_FACTS, attempt_facts
from herder.store.schema import attempts, runs, workers
from herder.store.work import Work

BATCH = 500  # rows of each kind one pass moves
_WAITING_TO_START = [RunState.QUEUED, RunState.PENDING]  # a start deadline holds in these


@dataclass(frozen=True)
class DueEnds:
    silent: list[WorkerSilence]  # workers not yet lost, with their last heartbeat
    overdue: list[AttemptFacts]


@dataclass(frozen=True)
class DueRuns:
    retries: list[DueRetry]
    expiring: list[tuple[str, RunState]]  # queued (or held) runs past their start deadline


def more_waiting(ends: DueEnds, due: DueRuns) -> bool:
    return max(len(ends.overdue), len(due.retries), len(due.expiring)) >= BATCH


def read_due_ends(work: Work) -> DueEnds:
    """Attempts whose end is due: their worker is silent, or their deadline passed."""
    connection, now = work.connection, work.now
    floor = live_floor(connection, now)
    silent = connection.execute(
        select(workers.c.id, workers.c.last_heartbeat_at).where(workers.c.state != WorkerState.LOST)
    ).all()
    overdue = connection.execute(
        select(*ATTEMPT_FACTS)
        .where(
            attempts.c.state == AttemptState.RUNNING,
            attempts.c.deadline_at < now,
            attempts.c.run_id >= floor,
        )
        .limit(BATCH)
    ).all()
    return DueEnds(
        silent=[WorkerSilence(row.id, row.last_heartbeat_at) for row in silent],
        overdue=[attempt_facts(row) for row in overdue],
    )


def read_due_runs(work: Work) -> DueRuns:
    """Runs whose retry or start deadline is due (read after the ends: a lost attempt with
    no back-off is queued again in the same pass)."""
    connection, now = work.connection, work.now
    floor = live_floor(connection, now)
    lost_last = (
        select(attempts.c.id)
        .where(
            attempts.c.run_id >= floor,
            attempts.c.run_id == runs.c.id,
            attempts.c.number == runs.c.attempt_count,
            attempts.c.state == AttemptState.LOST,
        )
        .exists()
    )
    retries = connection.execute(
        select(runs.c.id, runs.c.queued_at, lost_last.label("lost"))
        .where(runs.c.state == RunState.RETRY_WAIT, runs.c.retry_at <= now, runs.c.id >= floor)
        .limit(BATCH)
    ).all()
    expiring = connection.execute(
        select(runs.c.id, runs.c.state)
        .where(
            runs.c.state.in_(_WAITING_TO_START),
            runs.c.start_deadline <= now,
            runs.c.id >= floor,
        )
        .limit(BATCH)
    ).all()
    return DueRuns(
        retries=[DueRetry(row.id, row.queued_at, bool(row.lost)) for row in retries],
        expiring=[(row.id, RunState(row.state)) for row in expiring],
    )


def mark_lost(work: Work, worker_ids: Sequence[str], timeout: float | None) -> list[AttemptFacts]:
    """These workers are lost (unless one heartbeated within ``timeout`` meanwhile; ``None``:
    whatever their last heartbeat); the attempts they ran."""
    if not worker_ids:
        return []
    statement = update(workers).where(
        workers.c.id.in_(worker_ids), workers.c.state != WorkerState.LOST
    )
    if timeout is not None:
        since = work.now - timedelta(seconds=timeout)
        statement = statement.where(workers.c.last_heartbeat_at < since)
    lost = work.connection.execute(
        statement.values(state=WorkerState.LOST).returning(workers.c.id)
    ).scalars()
    rows = work.connection.execute(
        select(*ATTEMPT_FACTS).where(
            attempts.c.worker_id.in_(list(lost)),
            attempts.c.state == AttemptState.RUNNING,
            attempts.c.run_id >= live_floor(work.connection, work.now),
        )
    ).all()
    return [attempt_facts(row) for row in rows]


def next_due(work: Work, heartbeat_timeout: float, watching_since: datetime) -> datetime | None:
    """The earliest moment something above will be due; a silence is judged no sooner than a
    timeout after the reaper began watching (``domain.lifecycle.reap.silent_workers``)."""
    connection = work.connection
    floor = live_floor(connection, work.now)
    live_runs, live_attempts = runs.c.id >= floor, attempts.c.run_id >= floor
    candidates = [
        connection.execute(
            select(func.min(runs.c.retry_at)).where(runs.c.state == RunState.RETRY_WAIT, live_runs)
        ).scalar(),
        connection.execute(
            select(func.min(runs.c.start_deadline)).where(
                runs.c.state.in_(_WAITING_TO_START), live_runs
            )
        ).scalar(),
        connection.execute(
            select(func.min(attempts.c.deadline_at)).where(
                attempts.c.state == AttemptState.RUNNING, live_attempts
            )
        ).scalar(),
    ]
    oldest_heartbeat = connection.execute(
        select(func.min(workers.c.last_heartbeat_at)).where(workers.c.state != WorkerState.LOST)
    ).scalar()
    if oldest_heartbeat is not None:
        judged_from = max(oldest_heartbeat, watching_since)
        candidates.append(judged_from + timedelta(seconds=heartbeat_timeout))
    due = [moment for moment in candidates if moment is not None]
    return min(due) if due else None
