"""What the dispatcher reads for a pass: the fleet with what each worker runs, the tenants,
and the head of the queue — every tenant's first runs by class and age, so one tenant's
backlog never pushes the others out of sight."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, func, select

from herder.domain.lifecycle.stops import can_be_victim
from herder.domain.models import WorkerState
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
from herder.store.schema import attempts, runs, tenants, workers

QUEUE_WINDOW = 20_000  # queued runs one pass looks at, in priority-then-age order
TENANT_QUEUE_WINDOW = 2_000  # of them at most this many per tenant: a backlog cannot hide others
QUICK_WINDOW_BASE = 64  # a quick snapshot reads this many queued runs plus a few per free slot


def read_snapshot(
    connection: Connection,
    now: datetime,
    window: int = QUEUE_WINDOW,
    per_tenant: int = TENANT_QUEUE_WINDOW,
    *,
    quick: bool = False,
) -> Snapshot:
    """The fleet, the tenants and the head of the queue. A ``quick`` snapshot reads only as
    much of the queue as the fleet's free slots could take (a few times over), which is what
    a pass right after a submit or a completion needs."""
    fleet = connection.execute(select(workers).where(workers.c.state != WorkerState.LOST)).all()
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
    tenant_rows = connection.execute(select(tenants.c.id, tenants.c.weight, tenants.c.quotas)).all()
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
        preemptible=can_be_victim(row.preemptible, row.cancel_requested),
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
