"""What workers report about their attempts — output and how each ended — applied in one
transaction per batch, each item fenced by its attempt number.

A report from an attempt that is no longer current (a zombie) changes nothing; it is
recorded in the run's events and answered 409.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, select, update

from herder.clock import Clock
from herder.domain.states import AttemptState
from herder.store.database import Database
from herder.store.dialect import insert_ignoring_duplicates
from herder.store.notifications import notify_capacity
from herder.store.outcomes import RUN_FACTS, lock_runs_of, run_after_attempt
from herder.store.schema import attempts, log_chunks, runs
from herder.store.transitions import record_event

MAX_LOG_BYTES_PER_ATTEMPT = 8 * 1024 * 1024 + 64 * 1024  # the worker's 8 MiB and its marker


@dataclass(frozen=True)
class Usage:
    cpu_user_seconds: float
    cpu_system_seconds: float
    max_rss_kb: int


@dataclass(frozen=True)
class Completion:
    attempt_id: str
    attempt: int
    outcome: AttemptState
    exit_code: int | None
    reason: str
    usage: Usage | None


@dataclass(frozen=True)
class OutputChunk:
    attempt_id: str
    attempt: int
    seq: int  # per attempt, from the worker: a resent chunk is stored once
    stream: str
    data: bytes


@dataclass(frozen=True)
class ReportResult:
    attempt_id: str
    status: int  # 200 applied, 409 not the current attempt, 404 not this worker's
    detail: str


def _current_attempt(worker_id: str, attempt_id: str, attempt: int) -> list[ColumnElement[bool]]:
    """The fence: this attempt, at this number, on this worker, still running."""
    return [
        attempts.c.id == attempt_id,
        attempts.c.number == attempt,
        attempts.c.worker_id == worker_id,
        attempts.c.state == AttemptState.RUNNING,
    ]


class ReportRepository:
    def __init__(
        self,
        database: Database,
        clock: Clock,
        rng: random.Random,
        *,
        max_log_bytes: int = MAX_LOG_BYTES_PER_ATTEMPT,
    ) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng
        self.max_log_bytes = max_log_bytes

    def apply(
        self, worker_id: str, output: list[OutputChunk], completions: list[Completion]
    ) -> list[ReportResult]:
        """Output first, then completions, so an attempt's last words land before it ends.
        Returns a result per completion and per refused attempt's output."""
        now = self._clock.now()
        by_attempt: dict[tuple[str, int], list[OutputChunk]] = defaultdict(list)
        for chunk in output:
            by_attempt[chunk.attempt_id, chunk.attempt].append(chunk)
        results = []
        with self._db.write() as connection:
            if completions:
                ending = {completion.attempt_id for completion in completions}
                lock_runs_of(connection, ending | {attempt_id for attempt_id, _ in by_attempt})
            for (attempt_id, attempt), chunks in by_attempt.items():
                if not self._append(connection, worker_id, attempt_id, attempt, chunks, now):
                    results.append(
                        self._refuse(connection, worker_id, attempt_id, attempt, "output", now)
                    )
            for completion in completions:
                results.append(self._complete(connection, worker_id, completion, now))
            if completions:  # capacity freed: the dispatcher may place more
                notify_capacity(self._db, connection, worker_id)
        return results

    def _append(
        self,
        connection: Connection,
        worker_id: str,
        attempt_id: str,
        attempt: int,
        chunks: list[OutputChunk],
        now: datetime,
    ) -> bool:
        stored = connection.execute(
            select(attempts.c.log_bytes).where(*_current_attempt(worker_id, attempt_id, attempt))
        ).scalar()
        if stored is None:
            return False
        room = self.max_log_bytes - stored
        kept = []
        for chunk in chunks:
            if len(chunk.data) > room:
                break
            room -= len(chunk.data)
            kept.append(chunk)
        if kept:
            connection.execute(
                insert_ignoring_duplicates(self._db, log_chunks),
                [
                    {"attempt_id": attempt_id, "seq": chunk.seq, "stream": chunk.stream,
                     "data": chunk.data, "at": now}
                    for chunk in kept
                ],
            )  # fmt: skip
        values: dict[str, object] = {"log_bytes": self.max_log_bytes - room}
        if len(kept) < len(chunks):
            values["log_truncated"] = True
        connection.execute(update(attempts).where(attempts.c.id == attempt_id).values(**values))
        return True

    def _complete(
        self, connection: Connection, worker_id: str, completion: Completion, now: datetime
    ) -> ReportResult:
        usage = completion.usage
        fence = _current_attempt(worker_id, completion.attempt_id, completion.attempt)
        # the run is locked before its attempt is touched (see outcomes.lock_run)
        locked = connection.execute(
            select(attempts.c.preempt_requested_at, *RUN_FACTS)
            .join(runs, runs.c.id == attempts.c.run_id)
            .where(*fence)
            .with_for_update(of=runs, key_share=True)
        ).first()
        outcome = completion.outcome
        preempted = locked and locked.preempt_requested_at and not locked.cancel_requested
        if preempted and outcome != AttemptState.SUCCEEDED:
            outcome = AttemptState.PREEMPTED  # however the worker saw the stop
        run_id = connection.execute(
            update(attempts)
            .where(*fence)
            .values(
                state=outcome,
                exit_code=completion.exit_code,
                reason=completion.reason,
                finished_at=now,
                cpu_user_seconds=usage.cpu_user_seconds if usage else None,
                cpu_system_seconds=usage.cpu_system_seconds if usage else None,
                max_rss_kb=usage.max_rss_kb if usage else None,
            )
            .returning(attempts.c.run_id)
        ).scalar()
        if run_id is None:
            what = f"{completion.outcome} report"
            return self._refuse(
                connection, worker_id, completion.attempt_id, completion.attempt, what, now
            )
        target = run_after_attempt(
            self._db,
            connection,
            run_id,
            completion.attempt,
            outcome,
            completion.reason,
            exit_code=completion.exit_code,
            actor=f"worker:{worker_id}",
            now=now,
            rng=self._rng,
            locked=locked,
        )
        return ReportResult(completion.attempt_id, 200, f"run is {target}")

    @staticmethod
    def _refuse(
        connection: Connection,
        worker_id: str,
        attempt_id: str,
        attempt: int,
        what: str,
        now: datetime,
    ) -> ReportResult:
        row = connection.execute(
            select(attempts.c.run_id, attempts.c.number, attempts.c.state).where(
                attempts.c.id == attempt_id, attempts.c.worker_id == worker_id
            )
        ).first()
        if row is None:
            return ReportResult(attempt_id, 404, f"attempt {attempt_id} is not this worker's")
        if row.number != attempt:
            why = f"attempt {attempt_id} is number {row.number}, not {attempt}"
        else:
            why = f"attempt {attempt} is already {row.state}"
        message = f"refused a late {what} from worker {worker_id}: {why}"
        record_event(
            connection, row.run_id, now, actor=f"worker:{worker_id}", attempt=attempt,
            message=message,
        )  # fmt: skip
        return ReportResult(attempt_id, 409, message)
