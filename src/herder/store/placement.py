"""The dispatcher's side of the store: read a placement snapshot, apply a plan atomically.

Applying locks the workers it places on (``FOR UPDATE`` on PostgreSQL, in id order so two
dispatchers cannot deadlock; SQLite's write lock serialises everything) and recomputes what
they run from the attempts table, so a placement that no longer fits — another dispatcher
got there first — is skipped: a worker's free capacity never goes negative.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Select, bindparam, func, insert, select, update

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
from herder.domain.states import AttemptState, RunState, check_transition
from herder.domain.tenants import TenantQuotas
from herder.store.database import Database
from herder.store.notifications import notify_assigned, notify_cancel
from herder.store.schema import attempts, run_events, runs, tenants, workers
from herder.store.transitions import record_event

ATTEMPT_DEADLINE_MARGIN_SECONDS = 30  # past its timeout, the worker's own kill, and reporting
QUEUE_WINDOW = 20_000  # queued runs one pass looks at, in priority-then-age order
TENANT_QUEUE_WINDOW = 2_000  # of them at most this many per tenant: a backlog cannot hide others
QUICK_WINDOW_BASE = 64  # a quick snapshot reads this many queued runs plus a few per free slot


@dataclass(frozen=True)
class Applied:
    placed: list[Placement]
    skipped: list[str]  # run ids whose placement no longer fit or that were no longer queued
    preempted: list[Preemption]


class PlacementRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def snapshot(
        self,
        window: int = QUEUE_WINDOW,
        per_tenant: int = TENANT_QUEUE_WINDOW,
        *,
        quick: bool = False,
    ) -> Snapshot:
        """The fleet, the tenants and the head of the queue. A ``quick`` snapshot reads only as
        much of the queue as the fleet's free slots could take (a few times over), which is
        what a pass right after a submit or a completion needs."""
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
                    runs.c.cancel_requested,
                )
                .join(runs, runs.c.id == attempts.c.run_id)
                .where(attempts.c.state == AttemptState.RUNNING)
            ).all()  # fmt: skip
            if quick:
                free = _free_slots(fleet, active)
                window = min(window, QUICK_WINDOW_BASE + 4 * free)
                per_tenant = min(per_tenant, QUICK_WINDOW_BASE + 2 * free)
            queue = list(connection.execute(_queue_window(window, per_tenant)).all())
            if quick:  # and the longest-waiting, whatever their class: aging must not stall
                seen = {row.id for row in queue}
                oldest = connection.execute(_oldest_queued(QUICK_WINDOW_BASE)).all()
                queue += [row for row in oldest if row.id not in seen]
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
        """Place and preempt what still fits, in one transaction of a few statements."""
        now = self._clock.now()
        touched = sorted(
            {member.worker_id for placement in plan.placements for member in placement.members}
        )
        with self._db.write() as connection:
            room = _lock_and_measure(connection, touched)
            queued = _queued_runs(connection, [p.run_id for p in plan.placements])
            fitting = [
                placement
                for placement in plan.placements
                if placement.run_id in queued
                and _take_all(room, placement, queued[placement.run_id].need)
            ]
            numbers = _start_runs(connection, [p.run_id for p in fitting], now)
            placed = [placement for placement in fitting if placement.run_id in numbers]
            _record_starts(connection, placed, numbers, now)
            _insert_attempts(connection, placed, queued, numbers, now)
            preempted = [p for p in plan.preemptions if _request_preemption(connection, p, now)]
            for worker_id in {p.worker_id for p in preempted}:
                notify_cancel(self._db, connection, worker_id)
            for worker_id in {m.worker_id for p in placed for m in p.members}:
                notify_assigned(self._db, connection, worker_id)
        placed_ids = {placement.run_id for placement in placed}
        skipped = [p.run_id for p in plan.placements if p.run_id not in placed_ids]
        return Applied(placed, skipped, preempted)

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


@dataclass(frozen=True)
class _QueuedRun:
    need: Amount  # per member
    timeout_seconds: int


def _queued_runs(connection: Connection, run_ids: list[str]) -> dict[str, _QueuedRun]:
    found: dict[str, _QueuedRun] = {}
    for chunk in _chunks(run_ids):
        rows = connection.execute(
            select(
                runs.c.id, runs.c.cpu_milli, runs.c.memory_mb, runs.c.gpus, runs.c.spec,
            ).where(runs.c.id.in_(chunk), runs.c.state == RunState.QUEUED)
        ).all()  # fmt: skip
        for row in rows:
            need = Amount(row.cpu_milli, row.memory_mb, row.gpus, 1)
            found[row.id] = _QueuedRun(need, row.spec["timeout_seconds"])
    return found


def _take_all(room: dict[str, _Room], placement: Placement, need: Amount) -> bool:
    """Hold room for every member, or for none."""
    if any(member.worker_id not in room for member in placement.members):
        return False  # no longer alive
    trial = {member.worker_id: room[member.worker_id].copy() for member in placement.members}
    for member in placement.members:
        if not trial[member.worker_id].take(need, member.gpu_indices):
            return False
    room.update(trial)
    return True


def _start_runs(connection: Connection, run_ids: list[str], now: datetime) -> dict[str, int]:
    """``queued → running`` for those still queued; their new attempt numbers."""
    check_transition(RunState.QUEUED, RunState.RUNNING)
    numbers: dict[str, int] = {}
    for chunk in _chunks(run_ids):
        rows = connection.execute(
            update(runs)
            .where(runs.c.id.in_(chunk), runs.c.state == RunState.QUEUED)
            .values(
                state=RunState.RUNNING,
                attempt_count=runs.c.attempt_count + 1,
                started_at=now,
                waiting_reason=None,
            )
            .returning(runs.c.id, runs.c.attempt_count)
        ).all()
        numbers.update({row.id: row.attempt_count for row in rows})
    return numbers


def _record_starts(
    connection: Connection, placed: list[Placement], numbers: dict[str, int], now: datetime
) -> None:
    if not placed:
        return
    connection.execute(
        insert(run_events),
        [
            {
                "run_id": placement.run_id,
                "at": now,
                "from_state": RunState.QUEUED,
                "to_state": RunState.RUNNING,
                "attempt": numbers[placement.run_id],
                "actor": "dispatcher",
                "message": f"attempt {numbers[placement.run_id]} placed on "
                + ", ".join(sorted({member.worker_id for member in placement.members})),
            }
            for placement in placed
        ],
    )


def _insert_attempts(
    connection: Connection,
    placed: list[Placement],
    queued: dict[str, _QueuedRun],
    numbers: dict[str, int],
    now: datetime,
) -> None:
    rows = []
    for placement in placed:
        run = queued[placement.run_id]
        deadline = now + timedelta(seconds=run.timeout_seconds + ATTEMPT_DEADLINE_MARGIN_SECONDS)
        for member in placement.members:
            rows.append(
                {
                    "id": new_id("att", epoch_ms(now)),
                    "run_id": placement.run_id,
                    "number": numbers[placement.run_id],
                    "rank": member.rank,
                    "worker_id": member.worker_id,
                    "state": AttemptState.RUNNING,
                    "started_at": now,
                    "deadline_at": deadline,
                    "cpu_milli": run.need.cpu_milli,
                    "memory_mb": run.need.memory_mb,
                    "gpus": run.need.gpus,
                    "gpu_indices": list(member.gpu_indices) or None,
                }
            )
    if rows:
        connection.execute(insert(attempts), rows)


def _chunks(ids: list[str], size: int = 1000) -> list[list[str]]:
    """Bounded IN lists (SQLite caps the parameters of one statement)."""
    return [ids[start : start + size] for start in range(0, len(ids), size)]


def _lock_and_measure(connection: Connection, worker_ids: list[str]) -> dict[str, _Room]:
    """Lock the alive ones among ``worker_ids`` (sorted, so lockers never deadlock) and
    work out what each has free from the attempts it runs."""
    room: dict[str, _Room] = {}
    for chunk in _chunks(worker_ids):
        rows = connection.execute(
            select(workers.c.id, workers.c.cpu_milli, workers.c.memory_mb, workers.c.gpus,
                   workers.c.max_slots)
            .where(workers.c.id.in_(chunk), workers.c.state == WorkerState.ALIVE)
            .order_by(workers.c.id)
            .with_for_update()
        ).all()  # fmt: skip
        for row in rows:
            capacity = Amount(row.cpu_milli, row.memory_mb, row.gpus, row.max_slots)
            room[row.id] = _Room(capacity, set(range(row.gpus)))
    for chunk in _chunks(worker_ids):
        used = connection.execute(
            select(
                attempts.c.worker_id, attempts.c.cpu_milli, attempts.c.memory_mb,
                attempts.c.gpus, attempts.c.gpu_indices,
            ).where(attempts.c.worker_id.in_(chunk), attempts.c.state == AttemptState.RUNNING)
        ).all()  # fmt: skip
        for attempt in used:
            held = room.get(attempt.worker_id)
            if held is not None:
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


_QUEUED_COLUMNS = (
    runs.c.id, runs.c.tenant_id, runs.c.priority, runs.c.queued_at, runs.c.cpu_milli,
    runs.c.memory_mb, runs.c.gpus, runs.c.replicas, runs.c.requires,
)  # fmt: skip


def _free_slots(fleet: Sequence[Any], active: Sequence[Any]) -> int:
    running: dict[str, int] = defaultdict(int)
    for attempt in active:
        running[attempt.worker_id] += 1
    return sum(
        max(0, worker.max_slots - running[worker.id])
        for worker in fleet
        if worker.state == WorkerState.ALIVE
    )


def _oldest_queued(count: int) -> Select[Any]:
    return (
        select(*_QUEUED_COLUMNS)
        .where(runs.c.state == RunState.QUEUED)
        .order_by(runs.c.queued_at)
        .limit(count)
    )


def _queue_window(window: int, per_tenant: int) -> Select[Any]:
    """The first ``per_tenant`` queued runs of each tenant (by class, then age), at most
    ``window`` in all, so one tenant's backlog never pushes the others out of sight."""
    ranked = (
        select(
            *_QUEUED_COLUMNS,
            func.row_number().over(
                partition_by=runs.c.tenant_id,
                order_by=(runs.c.priority.desc(), runs.c.queued_at),
            ).label("position"),
        )
        .where(runs.c.state == RunState.QUEUED)
        .subquery()
    )  # fmt: skip
    return (
        select(ranked)
        .where(ranked.c.position <= per_tenant)
        .order_by(ranked.c.priority.desc(), ranked.c.queued_at)
        .limit(window)
    )


def _running(row: Any) -> RunningAttempt:
    return RunningAttempt(
        attempt_id=row.id,
        run_id=row.run_id,
        tenant_id=row.tenant_id,
        priority=row.priority,
        need=Amount(row.cpu_milli, row.memory_mb, row.gpus, 1),
        started_at=row.started_at,
        gpu_indices=tuple(row.gpu_indices or ()),
        preemptible=row.preemptible and not row.cancel_requested,  # stopping anyway
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
