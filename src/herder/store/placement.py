"""The dispatcher's side of the store: read a placement snapshot, apply a plan atomically.

Applying locks the workers it places on (``FOR UPDATE`` on PostgreSQL, in id order so two
dispatchers cannot deadlock; SQLite's write lock serialises everything) and recomputes what
they run from the attempts table, so a placement that no longer fits — another dispatcher
got there first — is skipped: a worker's free capacity never goes negative.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.ids import new_id
from herder.domain.models import WorkerState
from herder.domain.placement.policy import Placement, Plan, Preemption
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import (
    QueuedRun,
    RunningAttempt,
    Snapshot,
    TenantView,
    WorkerView,
)
from herder.domain.states import AttemptState, RunState
from herder.domain.tenants import TenantQuotas
from herder.store.database import Database
from herder.store.notifications import notify_assigned, notify_cancel
from herder.store.schema import attempts, runs, tenants, workers
from herder.store.transitions import move_run, record_event

ATTEMPT_DEADLINE_MARGIN_SECONDS = 30  # past its timeout, the worker's own kill, and reporting
QUEUE_WINDOW = 20_000  # queued runs one pass looks at, in priority-then-age order


@dataclass(frozen=True)
class Applied:
    placed: list[Placement]
    skipped: list[str]  # run ids whose placement no longer fit or that were no longer queued
    preempted: list[Preemption]


class PlacementRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def snapshot(self, window: int = QUEUE_WINDOW) -> Snapshot:
        now = self._clock.now()
        with self._db.read() as connection:
            fleet = connection.execute(
                select(workers).where(workers.c.state != WorkerState.LOST)
            ).all()
            active = connection.execute(
                select(
                    attempts.c.id, attempts.c.run_id, attempts.c.worker_id, attempts.c.cpu_milli,
                    attempts.c.memory_mb, attempts.c.gpus, attempts.c.started_at,
                    attempts.c.gpu_indices, attempts.c.preempt_requested_at, runs.c.tenant_id,
                    runs.c.priority, runs.c.preemptible, runs.c.preempted_at,
                )
                .join(runs, runs.c.id == attempts.c.run_id)
                .where(attempts.c.state == AttemptState.RUNNING)
            ).all()  # fmt: skip
            queue = connection.execute(
                select(
                    runs.c.id, runs.c.tenant_id, runs.c.priority, runs.c.queued_at,
                    runs.c.cpu_milli, runs.c.memory_mb, runs.c.gpus, runs.c.replicas,
                    runs.c.requires,
                )
                .where(runs.c.state == RunState.QUEUED)
                .order_by(runs.c.priority.desc(), runs.c.queued_at)
                .limit(window)
            ).all()  # fmt: skip
            tenant_rows = connection.execute(
                select(tenants.c.id, tenants.c.weight, tenants.c.quotas)
            ).all()
        by_worker: dict[str, list[RunningAttempt]] = defaultdict(list)
        for row in active:
            by_worker[row.worker_id].append(_running(row))
        return Snapshot(
            now=now,
            queued=tuple(_queued(row) for row in queue),
            workers=tuple(_worker(row, by_worker.get(row.id, [])) for row in fleet),
            tenants={
                row.id: TenantView(row.id, row.weight, TenantQuotas.model_validate(row.quotas))
                for row in tenant_rows
            },
        )

    def apply(self, plan: Plan) -> Applied:
        """Place and preempt what still fits, in one transaction."""
        now = self._clock.now()
        placed: list[Placement] = []
        skipped: list[str] = []
        preempted: list[Preemption] = []
        touched = sorted(
            {member.worker_id for placement in plan.placements for member in placement.members}
        )
        with self._db.write() as connection:
            room = _lock_and_measure(connection, touched)
            for placement in plan.placements:
                if self._place(connection, placement, room, now):
                    placed.append(placement)
                else:
                    skipped.append(placement.run_id)
            for preemption in plan.preemptions:
                if _request_preemption(connection, preemption, now):
                    preempted.append(preemption)
                    notify_cancel(self._db, connection, preemption.worker_id)
            for worker_id in {m.worker_id for p in placed for m in p.members}:
                notify_assigned(self._db, connection, worker_id)
        return Applied(placed, skipped, preempted)

    def _place(
        self, connection: Connection, placement: Placement, room: dict[str, _Room], now: datetime
    ) -> bool:
        run = connection.execute(
            select(
                runs.c.attempt_count, runs.c.cpu_milli, runs.c.memory_mb, runs.c.gpus,
                runs.c.spec,
            ).where(runs.c.id == placement.run_id, runs.c.state == RunState.QUEUED)
        ).first()  # fmt: skip
        if run is None:
            return False
        need = Amount(run.cpu_milli, run.memory_mb, run.gpus, 1)
        trial = {worker_id: room[worker_id].copy() for worker_id in room}
        for member in placement.members:
            if not trial[member.worker_id].take(need, member.gpu_indices):
                return False
        number = run.attempt_count + 1
        workers_named = ", ".join(sorted({member.worker_id for member in placement.members}))
        moved = move_run(
            connection, placement.run_id, RunState.QUEUED, RunState.RUNNING, now,
            actor="dispatcher", attempt=number - 1,
            message=f"attempt {number} placed on {workers_named}",
            attempt_count=number, started_at=now, waiting_reason=None,
        )  # fmt: skip
        if not moved:
            return False
        room.update(trial)
        deadline = now + timedelta(
            seconds=run.spec["timeout_seconds"] + ATTEMPT_DEADLINE_MARGIN_SECONDS
        )
        connection.execute(
            insert(attempts),
            [
                {
                    "id": new_id("att", epoch_ms(now)),
                    "run_id": placement.run_id,
                    "number": number,
                    "rank": member.rank,
                    "worker_id": member.worker_id,
                    "state": AttemptState.RUNNING,
                    "started_at": now,
                    "deadline_at": deadline,
                    "cpu_milli": need.cpu_milli,
                    "memory_mb": need.memory_mb,
                    "gpus": need.gpus,
                    "gpu_indices": list(member.gpu_indices) or None,
                }
                for member in placement.members
            ],
        )
        return True

    def record_reasons(self, reasons: dict[str, str]) -> None:
        """Store waiting reasons (only for runs still queued)."""
        if not reasons:
            return
        statement = (
            update(runs)
            .where(runs.c.id == bindparam("run_id"), runs.c.state == RunState.QUEUED)
            .values(waiting_reason=bindparam("new_reason"))
        )
        with self._db.write() as connection:
            connection.execute(
                statement,
                [{"run_id": run_id, "new_reason": reason} for run_id, reason in reasons.items()],
            )


@dataclass
class _Room:
    """A worker's free capacity inside the apply transaction."""

    free: Amount
    free_gpus: set[int]

    def copy(self) -> _Room:
        return _Room(self.free, set(self.free_gpus))

    def take(self, need: Amount, gpu_indices: Iterable[int]) -> bool:
        indices = set(gpu_indices)
        if not need.fits_in(self.free) or not indices <= self.free_gpus:
            return False
        self.free -= need
        self.free_gpus -= indices
        return True


def _lock_and_measure(connection: Connection, worker_ids: list[str]) -> dict[str, _Room]:
    if not worker_ids:
        return {}
    rows = connection.execute(
        select(workers)
        .where(workers.c.id.in_(worker_ids), workers.c.state == WorkerState.ALIVE)
        .order_by(workers.c.id)
        .with_for_update()
    ).all()
    used = connection.execute(
        select(
            attempts.c.worker_id, attempts.c.cpu_milli, attempts.c.memory_mb, attempts.c.gpus,
            attempts.c.gpu_indices,
        ).where(attempts.c.worker_id.in_(worker_ids), attempts.c.state == AttemptState.RUNNING)
    ).all()  # fmt: skip
    room = {
        row.id: _Room(
            Amount(row.cpu_milli, row.memory_mb, row.gpus, row.max_slots), set(range(row.gpus))
        )
        for row in rows
    }
    for attempt in used:
        if attempt.worker_id in room:
            held = room[attempt.worker_id]
            held.free -= Amount(attempt.cpu_milli, attempt.memory_mb, attempt.gpus, 1)
            held.free_gpus -= set(attempt.gpu_indices or [])
    return room


def _request_preemption(connection: Connection, preemption: Preemption, now: datetime) -> bool:
    chosen = connection.execute(
        update(attempts)
        .where(
            attempts.c.id == preemption.attempt_id,
            attempts.c.state == AttemptState.RUNNING,
            attempts.c.preempt_requested_at.is_(None),
        )
        .values(preempt_requested_at=now)
    ).rowcount
    if chosen:
        record_event(
            connection, preemption.run_id, now, actor="dispatcher",
            message=f"preempted on {preemption.worker_id} to make room for the higher-priority "
            f"run {preemption.for_run_id}; it will be queued again without using up a retry",
        )  # fmt: skip
    return bool(chosen)


def _running(row: Any) -> RunningAttempt:
    return RunningAttempt(
        attempt_id=row.id,
        run_id=row.run_id,
        tenant_id=row.tenant_id,
        priority=row.priority,
        need=Amount(row.cpu_milli, row.memory_mb, row.gpus, 1),
        started_at=row.started_at,
        gpu_indices=tuple(row.gpu_indices or ()),
        preemptible=row.preemptible,
        preempting=row.preempt_requested_at is not None,
        last_preempted_at=row.preempted_at,
    )


def _queued(row: Any) -> QueuedRun:
    return QueuedRun(
        id=row.id,
        tenant_id=row.tenant_id,
        priority=row.priority,
        queued_at=row.queued_at,
        need=Amount(row.cpu_milli, row.memory_mb, row.gpus, 1),
        replicas=row.replicas,
        requires=row.requires or {},
    )


def _worker(row: Any, running: list[RunningAttempt]) -> WorkerView:
    return WorkerView(
        id=row.id,
        capacity=Amount(row.cpu_milli, row.memory_mb, row.gpus, row.max_slots),
        labels=row.labels or {},
        running=tuple(running),
        address=row.address,
        draining=row.state == WorkerState.DRAINING,
    )
