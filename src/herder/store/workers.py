"""The worker protocol's side of the store: register, heartbeat, claim, report.

Claiming is one transaction: pick queued runs that fit the worker's free capacity, move each
``queued → running`` with a conditional update and create its attempt. On PostgreSQL the
candidate rows are locked with ``FOR UPDATE SKIP LOCKED`` so racing workers take different
runs; on SQLite the write lock (``BEGIN IMMEDIATE``) serialises claims.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Conflict, Gone, NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec, Resources
from herder.domain.models import Assignment, Worker, WorkerState
from herder.domain.states import AttemptState, RunState
from herder.store.database import Database
from herder.store.outcomes import end_attempt
from herder.store.schema import attempts, runs, workers
from herder.store.transitions import move_run, record_event

ATTEMPT_DEADLINE_MARGIN_SECONDS = 30  # past its timeout, the worker's own kill, and reporting
MAX_CLAIM_WINDOW = 512  # queued runs looked at (and locked) per claim, in queue order


@dataclass(frozen=True)
class RunningAttempt:
    """What a worker says it runs: the attempt and its number (the fencing token)."""

    attempt_id: str
    attempt: int

    @property
    def key(self) -> tuple[str, int]:
        return self.attempt_id, self.attempt


@dataclass(frozen=True)
class Directives:
    """What the server tells a worker besides new work."""

    cancel: list[str]  # attempt ids to stop now
    drop: list[str]  # attempt ids that are no longer this worker's: kill, report nothing


class WorkerRepository:
    def __init__(self, database: Database, clock: Clock, rng: random.Random) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng
        self._owners: dict[str, str] = {}

    def register(
        self,
        token_id: str,
        *,
        name: str,
        capacity: Resources,
        max_slots: int,
        labels: dict[str, str],
        version: str,
    ) -> Worker:
        now = self._clock.now()
        worker = Worker(
            id=new_id("wrk", epoch_ms(now)),
            name=name,
            state=WorkerState.ALIVE,
            capacity=capacity,
            max_slots=max_slots,
            labels=labels,
            version=version,
            registered_at=now,
            last_heartbeat_at=now,
        )
        with self._db.write() as connection:
            connection.execute(
                insert(workers).values(
                    id=worker.id,
                    token_id=token_id,
                    name=name,
                    state=worker.state,
                    cpu_milli=capacity.cpu_milli,
                    memory_mb=capacity.memory_mb,
                    gpus=capacity.gpus,
                    max_slots=max_slots,
                    labels=labels,
                    version=version,
                    registered_at=now,
                    last_heartbeat_at=now,
                )
            )
        return worker

    def fleet(self) -> list[Worker]:
        with self._db.read() as connection:
            rows = connection.execute(select(workers).order_by(workers.c.id)).all()
        return [
            Worker(
                id=row.id,
                name=row.name,
                state=WorkerState(row.state),
                capacity=Resources(
                    cpu=row.cpu_milli / 1000, memory_mb=row.memory_mb, gpus=row.gpus
                ),
                max_slots=row.max_slots,
                labels=row.labels,
                version=row.version,
                registered_at=row.registered_at,
                last_heartbeat_at=row.last_heartbeat_at,
            )
            for row in rows
        ]

    def known_owner(self, worker_id: str, token_id: str) -> bool:
        """True if this worker was already checked to belong to this token (it never changes
        hands); no store access."""
        return self._owners.get(worker_id) == token_id

    def check_owner(self, worker_id: str, token_id: str) -> None:
        if self.known_owner(worker_id, token_id):
            return
        with self._db.read() as connection:
            owner = connection.execute(
                select(workers.c.token_id).where(workers.c.id == worker_id)
            ).scalar()
        if owner != token_id:
            raise NotFound(f"worker {worker_id} not found for this token; register first")
        self._owners[worker_id] = token_id  # a worker never changes hands

    def heartbeat(
        self, worker_id: str, running: list[RunningAttempt], *, unreported_grace_seconds: float
    ) -> Directives:
        """The worker is alive; answers what to stop. A worker already declared lost is
        told so (``Gone``): its attempts were given to others.

        An attempt the worker does not list although it was given to it more than
        ``unreported_grace_seconds`` ago never reached it (the claim's answer was lost, say
        when the server died mid-claim): it ends ``lost`` and its run retries.
        """
        now = self._clock.now()
        reported = {item.key for item in running}
        with self._db.write() as connection:
            alive = connection.execute(
                update(workers)
                .where(workers.c.id == worker_id, workers.c.state != WorkerState.LOST)
                .values(last_heartbeat_at=now)
            ).rowcount
            if not alive:
                raise _gone(worker_id)
            given = connection.execute(
                select(attempts.c.id, attempts.c.number).where(
                    attempts.c.worker_id == worker_id,
                    attempts.c.state == AttemptState.RUNNING,
                    attempts.c.started_at < now - timedelta(seconds=unreported_grace_seconds),
                )
            ).all()
            for attempt_id, number in given:
                if (attempt_id, number) not in reported:
                    end_attempt(
                        self._db, connection, self._rng, f"worker:{worker_id}", attempt_id,
                        AttemptState.LOST, "never reached its worker (the claim's answer was "
                        "lost)", now,
                    )  # fmt: skip
        directives = self.directives(worker_id, running)
        if directives.drop:
            self._record_stale(
                worker_id, [item for item in running if item.attempt_id in directives.drop]
            )
        return directives

    def _record_stale(self, worker_id: str, stale: list[RunningAttempt]) -> None:
        """A heartbeat naming attempts that are no longer current: say so in their runs."""
        now = self._clock.now()
        with self._db.write() as connection:
            for item in stale:
                row = connection.execute(
                    select(attempts.c.run_id, attempts.c.state).where(
                        attempts.c.id == item.attempt_id, attempts.c.worker_id == worker_id
                    )
                ).first()
                if row is not None:
                    record_event(
                        connection,
                        row.run_id,
                        now,
                        actor=f"worker:{worker_id}",
                        attempt=item.attempt,
                        message=f"refused a heartbeat for attempt {item.attempt}, which is "
                        f"{row.state}: the worker was told to kill it",
                    )

    def directives(self, worker_id: str, running: list[RunningAttempt]) -> Directives:
        """Which of its attempts the worker must stop: cancelled ones (report them), and ones
        that are no longer its current attempts (kill them, report nothing)."""
        with self._db.read() as connection:
            current = connection.execute(
                select(attempts.c.id, attempts.c.number, runs.c.cancel_requested)
                .join(runs, runs.c.id == attempts.c.run_id)
                .where(
                    attempts.c.worker_id == worker_id,
                    attempts.c.state == AttemptState.RUNNING,
                )
            ).all()
        mine = {(row.id, row.number) for row in current}
        return Directives(
            cancel=[row.id for row in current if row.cancel_requested],
            drop=[item.attempt_id for item in running if item.key not in mine],
        )

    def claim_with_directives(
        self, worker_id: str, max_runs: int, running: list[RunningAttempt], look_for_news: bool
    ) -> tuple[list[Assignment], Directives]:
        """Claim, and (when asked) look up which of the worker's attempts to stop or drop."""
        nothing = Directives(cancel=[], drop=[])
        directives = self.directives(worker_id, running) if look_for_news else nothing
        return self.claim(worker_id, max_runs), directives

    def claim(self, worker_id: str, max_runs: int) -> list[Assignment]:
        """Up to ``max_runs`` queued runs that fit what the worker has free, now running."""
        if max_runs <= 0:
            return []
        now = self._clock.now()
        with self._db.write() as connection:
            free = self._free_capacity(connection, worker_id)
            if free is None:
                return []
            free_cpu, free_memory, free_gpus, free_slots = free
            candidates = connection.execute(
                select(
                    runs.c.id,
                    runs.c.tenant_id,
                    runs.c.spec,
                    runs.c.idempotency_key,
                    runs.c.attempt_count,
                    runs.c.cpu_milli,
                    runs.c.memory_mb,
                    runs.c.gpus,
                )
                .where(runs.c.state == RunState.QUEUED)
                .order_by(runs.c.priority.desc(), runs.c.queued_at)
                .limit(min(MAX_CLAIM_WINDOW, 2 * min(max_runs, free_slots) + 8))
                .with_for_update(skip_locked=True)
            ).all()
            chosen: list[Any] = []
            for run in candidates:
                if len(chosen) >= min(max_runs, free_slots):
                    break
                if (
                    run.cpu_milli <= free_cpu
                    and run.memory_mb <= free_memory
                    and run.gpus <= free_gpus
                ):
                    free_cpu -= run.cpu_milli
                    free_memory -= run.memory_mb
                    free_gpus -= run.gpus
                    chosen.append(run)
            return [self._start_attempt(connection, worker_id, run, now) for run in chosen]

    @staticmethod
    def _free_capacity(connection: Connection, worker_id: str) -> tuple[int, int, int, int] | None:
        """What the worker has free; ``None`` when it takes no new work (draining)."""
        worker = connection.execute(
            select(
                workers.c.state,
                workers.c.cpu_milli,
                workers.c.memory_mb,
                workers.c.gpus,
                workers.c.max_slots,
            ).where(workers.c.id == worker_id)
        ).first()
        if worker is None:
            raise NotFound(f"worker {worker_id} is not registered")
        if worker.state == WorkerState.LOST:
            raise _gone(worker_id)
        if worker.state != WorkerState.ALIVE:
            return None
        used = connection.execute(
            select(
                func.count(),
                func.coalesce(func.sum(attempts.c.cpu_milli), 0),
                func.coalesce(func.sum(attempts.c.memory_mb), 0),
                func.coalesce(func.sum(attempts.c.gpus), 0),
            ).where(attempts.c.worker_id == worker_id, attempts.c.state == AttemptState.RUNNING)
        ).one()
        count, cpu, memory, gpus = used
        return (
            worker.cpu_milli - cpu,
            worker.memory_mb - memory,
            worker.gpus - gpus,
            worker.max_slots - count,
        )

    @staticmethod
    def _start_attempt(
        connection: Connection, worker_id: str, run: Any, now: datetime
    ) -> Assignment:
        number: int = run.attempt_count + 1
        run_id: str = run.id
        attempt_id = new_id("att", epoch_ms(now))
        moved = move_run(
            connection,
            run_id,
            RunState.QUEUED,
            RunState.RUNNING,
            now,
            actor=f"worker:{worker_id}",
            message=f"attempt {number} started on {worker_id}",
            attempt=number - 1,
            attempt_count=number,
            started_at=now,
        )
        if not moved:
            raise Conflict(f"run {run_id} was taken by someone else")  # locked: cannot happen
        timeout = timedelta(seconds=run.spec["timeout_seconds"] + ATTEMPT_DEADLINE_MARGIN_SECONDS)
        connection.execute(
            insert(attempts).values(
                deadline_at=now + timeout,
                id=attempt_id,
                run_id=run_id,
                number=number,
                worker_id=worker_id,
                state=AttemptState.RUNNING,
                started_at=now,
                cpu_milli=run.cpu_milli,
                memory_mb=run.memory_mb,
                gpus=run.gpus,
            )
        )
        return Assignment(
            attempt_id=attempt_id,
            attempt=number,
            run_id=run_id,
            tenant_id=run.tenant_id,
            idempotency_key=run.idempotency_key,
            spec=JobSpec.model_validate(run.spec),
        )


def _gone(worker_id: str) -> Gone:
    return Gone(
        f"worker {worker_id} was declared lost and its attempts given to others; "
        "kill what it runs and register again"
    )
