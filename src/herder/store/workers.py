"""The worker protocol's side of the store: register, heartbeat, claim, report.

The dispatcher decides what runs where (store/placement.py); a claim hands the worker the
attempts placed on it that it has not been given yet, and marks them delivered.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, insert, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Gone, NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec, Resources
from herder.domain.models import Assignment, Worker, WorkerState
from herder.domain.states import AttemptState
from herder.store.database import Database
from herder.store.fleet import worker_record
from herder.store.notifications import notify_capacity
from herder.store.outcomes import end_attempt
from herder.store.schema import attempts, runs, workers
from herder.store.transitions import record_event


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
    preempt: list[str]  # attempt ids to stop for a higher-priority run: report them preempted


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
        address: str = "",
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
            address=address,
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
                    address=address,
                )
            )
            notify_capacity(self._db, connection, worker.id)  # the dispatcher may place here
        return worker

    def fleet(self) -> list[Worker]:
        with self._db.read() as connection:
            rows = connection.execute(select(workers).order_by(workers.c.id)).all()
        return [worker_record(row) for row in rows]

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

        An attempt the worker does not list although a claim handed it over more than
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
                    attempts.c.delivered_at < now - timedelta(seconds=unreported_grace_seconds),
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
                select(
                    attempts.c.id,
                    attempts.c.number,
                    attempts.c.preempt_requested_at,
                    runs.c.cancel_requested,
                )
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
            preempt=[
                row.id
                for row in current
                if row.preempt_requested_at is not None and not row.cancel_requested
            ],
        )

    def claim_with_directives(
        self, worker_id: str, max_runs: int, running: list[RunningAttempt], look_for_news: bool
    ) -> tuple[list[Assignment], Directives]:
        """Claim, and (when asked) look up which of the worker's attempts to stop or drop."""
        nothing = Directives(cancel=[], drop=[], preempt=[])
        directives = self.directives(worker_id, running) if look_for_news else nothing
        return self.claim(worker_id, max_runs), directives

    def claim(self, worker_id: str, max_runs: int) -> list[Assignment]:
        """Up to ``max_runs`` of the attempts the dispatcher placed on this worker and not yet
        handed over, now handed over. A draining worker still gets what was placed before.
        One cancelled or preempted before it was handed over ends here instead: the worker
        would start it before it heard the stop."""
        if max_runs <= 0:
            return []
        now = self._clock.now()
        with self._db.write() as connection:
            state = connection.execute(
                select(workers.c.state).where(workers.c.id == worker_id)
            ).scalar()
            if state is None:
                raise NotFound(f"worker {worker_id} is not registered")
            if state == WorkerState.LOST:
                raise _gone(worker_id)
            placed = connection.execute(
                select(
                    attempts.c.id, attempts.c.number, attempts.c.rank, attempts.c.gpu_indices,
                    runs.c.id.label("run_id"), runs.c.tenant_id, runs.c.spec,
                    runs.c.idempotency_key, runs.c.replicas, runs.c.cancel_requested,
                    attempts.c.preempt_requested_at,
                )
                .join(runs, runs.c.id == attempts.c.run_id)
                .where(
                    attempts.c.worker_id == worker_id,
                    attempts.c.state == AttemptState.RUNNING,
                    attempts.c.delivered_at.is_(None),
                )
                .order_by(attempts.c.id)
                .limit(max_runs)
            ).all()  # fmt: skip
            stopped = [row for row in placed if row.cancel_requested or row.preempt_requested_at]
            for row in stopped:
                outcome, why = (
                    (AttemptState.CANCELLED, "cancelled before it reached its worker")
                    if row.cancel_requested
                    else (AttemptState.PREEMPTED, "preempted before it reached its worker")
                )
                end_attempt(
                    self._db, connection, self._rng, f"worker:{worker_id}", row.id, outcome,
                    why, now,
                )  # fmt: skip
            placed = [row for row in placed if row not in stopped]
            if not placed:
                return []
            connection.execute(
                update(attempts)
                .where(attempts.c.id.in_([row.id for row in placed]))
                .values(delivered_at=now)
            )
            peers = _gang_peers(connection, [row for row in placed if row.replicas > 1])
        return [
            Assignment(
                attempt_id=row.id,
                attempt=row.number,
                run_id=row.run_id,
                tenant_id=row.tenant_id,
                idempotency_key=row.idempotency_key,
                spec=JobSpec.model_validate(row.spec),
                gpu_indices=row.gpu_indices or [],
                rank=row.rank,
                world_size=row.replicas,
                peers=peers.get((row.run_id, row.number), []),
            )
            for row in placed
        ]


def _gang_peers(connection: Connection, members: list[Any]) -> dict[tuple[str, int], list[str]]:
    """Each gang's member addresses by rank (the worker's address, or its id if it gave none)."""
    if not members:
        return {}
    rows = connection.execute(
        select(attempts.c.run_id, attempts.c.number, attempts.c.rank, workers.c.address,
               workers.c.id.label("worker_id"))
        .join(workers, workers.c.id == attempts.c.worker_id)
        .where(attempts.c.run_id.in_({member.run_id for member in members}))
        .order_by(attempts.c.rank)
    ).all()  # fmt: skip
    peers: dict[tuple[str, int], list[str]] = {}
    for row in rows:
        peers.setdefault((row.run_id, row.number), []).append(row.address or row.worker_id)
    return peers


def _gone(worker_id: str) -> Gone:
    return Gone(
        f"worker {worker_id} was declared lost and its attempts given to others; "
        "kill what it runs and register again"
    )
