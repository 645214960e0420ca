"""The reaper's reads and writes: what has become due, and moving it on.

Each step is a batch of conditional updates, safe to run twice or from two processes at
once: a row that someone else already moved no longer matches and is skipped.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Column, ColumnElement, Select, func, select, update

from herder.clock import Clock
from herder.domain.models import WorkerState
from herder.domain.states import AttemptState, RunState
from herder.store.database import Database
from herder.store.notifications import notify_work
from herder.store.outcomes import end_attempt
from herder.store.schema import attempts, runs, workers
from herder.store.transitions import move_run

BATCH = 500  # rows moved per step and transaction
REAPER = "reaper"


class ReaperRepository:
    def __init__(self, database: Database, clock: Clock, rng: random.Random) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng

    def mark_lost_workers(self, heartbeat_timeout: float, watching_since: datetime) -> int:
        """Workers silent past the timeout are lost; their running attempts end ``lost`` and
        their runs follow their retry policy at once.

        Silence is judged only over time the caller has watched (``watching_since``): after a
        restart, workers that could not reach a stopped server get a full timeout to return.
        """
        now = self._clock.now()
        silent_since = now - timedelta(seconds=heartbeat_timeout)
        if watching_since > silent_since:
            return 0
        with self._db.write() as connection:
            lost = (
                connection.execute(
                    update(workers)
                    .where(
                        workers.c.state != WorkerState.LOST,
                        workers.c.last_heartbeat_at < silent_since,
                    )
                    .values(state=WorkerState.LOST)
                    .returning(workers.c.id)
                )
                .scalars()
                .all()
            )
            for worker_id in lost:
                running = (
                    connection.execute(
                        select(attempts.c.id).where(
                            attempts.c.worker_id == worker_id,
                            attempts.c.state == AttemptState.RUNNING,
                        )
                    )
                    .scalars()
                    .all()
                )
                for attempt_id in running:
                    end_attempt(
                        self._db, connection, self._rng, REAPER, attempt_id, AttemptState.LOST,
                        f"worker {worker_id} stopped heartbeating for over "
                        f"{heartbeat_timeout:g}s", now,
                    )  # fmt: skip
        return len(lost)

    def time_out_attempts(self) -> int:
        """Attempts past their deadline whose worker never ended them (it may be gone, or
        stuck): ``timed_out`` here, whatever the worker says later."""
        now = self._clock.now()
        with self._db.write() as connection:
            overdue = (
                connection.execute(
                    select(attempts.c.id)
                    .where(attempts.c.state == AttemptState.RUNNING, attempts.c.deadline_at < now)
                    .limit(BATCH)
                )
                .scalars()
                .all()
            )
            for attempt_id in overdue:
                end_attempt(
                    self._db, connection, self._rng, REAPER, attempt_id, AttemptState.TIMED_OUT,
                    "timed out: its worker did not end it by its deadline", now,
                )  # fmt: skip
        return len(overdue)

    def requeue_due_retries(self) -> int:
        """Runs whose retry is due go back to the queue: behind what queued meanwhile, except
        a run whose attempt was ``lost`` (its worker died, not its job), which keeps its
        original place."""
        kept = self._move_due(
            RunState.RETRY_WAIT, RunState.QUEUED, runs.c.retry_at,
            "retry due: queued again in its place (its worker was lost)",
            only=runs.c.id.in_(_lost_last_attempt()), retry_at=None, queued_at=runs.c.queued_at,
        )  # fmt: skip
        moved = self._move_due(
            RunState.RETRY_WAIT, RunState.QUEUED, runs.c.retry_at, "retry due: queued again",
            retry_at=None,
        )  # fmt: skip
        return kept + moved

    def expire_unstarted(self) -> int:
        return self._move_due(
            RunState.QUEUED, RunState.EXPIRED, runs.c.start_deadline,
            "not started by its start deadline",
            reason="expired: not started by its start deadline",
        )  # fmt: skip

    def _move_due(
        self,
        source: RunState,
        target: RunState,
        due_at: Column[datetime],
        message: str,
        only: ColumnElement[bool] | None = None,
        **values: Any,
    ) -> int:
        """Move runs in ``source`` whose ``due_at`` has passed (and that match ``only``) to
        ``target``, a batch at a time."""
        now = self._clock.now()
        query = select(runs.c.id).where(runs.c.state == source, due_at <= now)
        if only is not None:
            query = query.where(only)
        with self._db.write() as connection:
            due = connection.execute(query.limit(BATCH)).scalars()
            moved = sum(
                move_run(
                    connection, run_id, source, target, now, actor=REAPER, message=message, **values
                )
                for run_id in list(due)
            )
            if moved and target is RunState.QUEUED:
                notify_work(self._db, connection)
        return moved

    def next_due(self, heartbeat_timeout: float) -> datetime | None:
        """The earliest moment one of the steps above will have something to do."""
        with self._db.read() as connection:
            candidates = [
                connection.execute(
                    select(func.min(runs.c.retry_at)).where(runs.c.state == RunState.RETRY_WAIT)
                ).scalar(),
                connection.execute(
                    select(func.min(runs.c.start_deadline)).where(runs.c.state == RunState.QUEUED)
                ).scalar(),
                connection.execute(
                    select(func.min(attempts.c.deadline_at)).where(
                        attempts.c.state == AttemptState.RUNNING
                    )
                ).scalar(),
            ]
            oldest_heartbeat = connection.execute(
                select(func.min(workers.c.last_heartbeat_at)).where(
                    workers.c.state != WorkerState.LOST
                )
            ).scalar()
        if oldest_heartbeat is not None:
            candidates.append(oldest_heartbeat + timedelta(seconds=heartbeat_timeout))
        due = [moment for moment in candidates if moment is not None]
        return min(due) if due else None


def _lost_last_attempt() -> Select[tuple[str]]:
    """The runs whose latest attempt ended ``lost``."""
    return select(attempts.c.run_id).where(
        attempts.c.run_id == runs.c.id,
        attempts.c.number == runs.c.attempt_count,
        attempts.c.state == AttemptState.LOST,
    )
