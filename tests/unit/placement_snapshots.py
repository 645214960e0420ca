"""Hand-made snapshots for the placement policy's tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from herder.domain.placement.fleet import Fleet, WorkerRoom
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import QueuedRun, RunningAttempt, Snapshot, WorkerView

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def need(cpu: float = 1, memory_mb: int = 256, gpus: int = 0) -> Amount:
    return Amount(round(cpu * 1000), memory_mb, gpus, 1)


def worker(
    name: str,
    cpu: float = 8,
    memory_mb: int = 16384,
    gpus: int = 0,
    slots: int = 100,
    labels: dict[str, str] | None = None,
    running: tuple[RunningAttempt, ...] = (),
    draining: bool = False,
) -> WorkerView:
    return WorkerView(
        id=name,
        capacity=Amount(round(cpu * 1000), memory_mb, gpus, slots),
        labels=labels or {},
        running=running,
        draining=draining,
    )


def queued(
    name: str,
    tenant: str = "t1",
    priority: int = 1,
    waited: float = 0,
    replicas: int = 1,
    requires: dict[str, str] | None = None,
    cpu: float = 1,
    memory_mb: int = 256,
    gpus: int = 0,
) -> QueuedRun:
    return QueuedRun(
        id=name,
        tenant_id=tenant,
        priority=priority,
        queued_at=NOW - timedelta(seconds=waited),
        need=need(cpu, memory_mb, gpus),
        replicas=replicas,
        requires=requires or {},
    )


def running(
    name: str,
    tenant: str = "t1",
    priority: int = 0,
    preemptible: bool = True,
    started_ago: float = 60,
    gpu_indices: tuple[int, ...] = (),
    preempted_ago: float | None = None,
    preempting: bool = False,
    cpu: float = 1,
    memory_mb: int = 256,
    gpus: int = 0,
) -> RunningAttempt:
    return RunningAttempt(
        attempt_id=f"att_{name}",
        run_id=name,
        tenant_id=tenant,
        priority=priority,
        need=need(cpu, memory_mb, gpus),
        started_at=NOW - timedelta(seconds=started_ago),
        gpu_indices=gpu_indices,
        preemptible=preemptible,
        preempting=preempting,
        last_preempted_at=None if preempted_ago is None else NOW - timedelta(seconds=preempted_ago),
    )


def rooms(*views: WorkerView) -> list[WorkerRoom]:
    """The workers as a pass holds them, for the stages that take ``WorkerRoom``s."""
    return Fleet(Snapshot(now=NOW, queued=(), workers=views)).workers
