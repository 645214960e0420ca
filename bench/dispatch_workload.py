"""The dispatch scenario's world: tenants, jobs, queued runs and a fleet, made from a seed.

The same world feeds the policy alone (as a hand-built ``Snapshot``) and the store (as rows),
so the two measurements decide on the same queue and fleet; only what already runs differs.
Shapes come from jobs, as in production: each tenant has a few jobs and its runs share their
job's resources, labels and priority.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from herder.domain.jobs import JobSpec, Priority, Resources
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import (
    QueuedRun,
    RunningAttempt,
    Snapshot,
    TenantView,
    WorkerView,
)
from herder.domain.tenants import TenantQuotas

TENANTS = 100
JOBS_PER_TENANT = 5
QUEUED_RUNS = 10_000
WORKERS = 500
ZONES = ("zone-a", "zone-b", "zone-c")
GPU_MODELS = ("a100", "h100")
DRAINING_FRACTION = 0.02


@dataclass(frozen=True)
class TenantPlan:
    name: str
    weight: int
    quotas: TenantQuotas


@dataclass(frozen=True)
class JobPlan:
    tenant: int  # index into World.tenants
    name: str
    spec: JobSpec

    @property
    def need(self) -> Amount:
        resources = self.spec.resources
        return Amount(resources.cpu_milli, resources.memory_mb, resources.gpus, 1)


@dataclass(frozen=True)
class RunPlan:
    job: int  # index into World.jobs
    waited_seconds: float


@dataclass(frozen=True)
class WorkerPlan:
    name: str
    capacity: Amount  # slots = max_slots
    labels: dict[str, str]
    draining: bool
    running: tuple[tuple[int, float], ...]  # (job index, seconds since it started)


@dataclass(frozen=True)
class World:
    tenants: list[TenantPlan]
    jobs: list[JobPlan]
    queued: list[RunPlan]
    workers: list[WorkerPlan]

    def snapshot(self, now: datetime) -> Snapshot:
        """The policy's input, built by hand; ids are the plans' names and indices."""
        queued = tuple(
            QueuedRun(
                id=f"run{index:05d}",
                tenant_id=self.tenants[self.jobs[run.job].tenant].name,
                priority=self.jobs[run.job].spec.priority.rank,
                queued_at=now - timedelta(seconds=run.waited_seconds),
                need=self.jobs[run.job].need,
                replicas=self.jobs[run.job].spec.replicas,
                requires=self.jobs[run.job].spec.requires,
            )
            for index, run in enumerate(self.queued)
        )
        return Snapshot(
            now=now,
            queued=queued,
            workers=tuple(self._worker_view(worker, now) for worker in self.workers),
            tenants={
                tenant.name: TenantView(tenant.name, tenant.weight, tenant.quotas)
                for tenant in self.tenants
            },
        )

    def _worker_view(self, worker: WorkerPlan, now: datetime) -> WorkerView:
        running, next_gpu = [], 0
        for number, (job_index, age) in enumerate(worker.running):
            job = self.jobs[job_index]
            gpus = tuple(range(next_gpu, next_gpu + job.need.gpus))
            next_gpu += job.need.gpus
            running.append(
                RunningAttempt(
                    attempt_id=f"{worker.name}-att{number}",
                    run_id=f"{worker.name}-run{number}",
                    tenant_id=self.tenants[job.tenant].name,
                    priority=job.spec.priority.rank,
                    need=job.need,
                    started_at=now - timedelta(seconds=age),
                    gpu_indices=gpus,
                    preemptible=job.spec.preemptible,
                )
            )
        return WorkerView(
            id=worker.name,
            capacity=worker.capacity,
            labels=worker.labels,
            running=tuple(running),
            draining=worker.draining,
        )

    def running_attempts(self) -> int:
        return sum(len(worker.running) for worker in self.workers)


def make_world(seed: int, load: tuple[float, float]) -> World:
    """``load``: the range of the fraction of each worker already in use (cpu and slots)."""
    rng = random.Random(seed)
    tenants = [_tenant(rng, index) for index in range(TENANTS)]
    jobs = [
        JobPlan(tenant, f"t{tenant:03d}-job{number}", _job_spec(rng))
        for tenant in range(TENANTS)
        for number in range(JOBS_PER_TENANT)
    ]
    # A few tenants submit most of the work (Zipf-like), as in a shared cluster.
    tenant_weights = [1 / (rank + 1) ** 0.8 for rank in range(TENANTS)]
    queued = []
    for _ in range(QUEUED_RUNS):
        tenant = rng.choices(range(TENANTS), tenant_weights)[0]
        job = tenant * JOBS_PER_TENANT + rng.randrange(JOBS_PER_TENANT)
        queued.append(RunPlan(job, _waited(rng)))
    filling = random.Random(seed + 1)  # apart, so every load gets the same fleet and queue
    workers = [_worker(rng, filling, index, jobs, load) for index in range(WORKERS)]
    return World(tenants, jobs, queued, workers)


def _tenant(rng: random.Random, index: int) -> TenantPlan:
    quotas = TenantQuotas()
    roll = rng.random()
    if roll < 0.15:
        quotas = TenantQuotas(max_cpu=rng.choice([32, 64, 128, 256]))
    elif roll < 0.20:
        quotas = TenantQuotas(max_gpus=rng.choice([4, 8]), max_cpu=512)
    elif roll < 0.30:
        quotas = TenantQuotas(max_queued=rng.choice([20, 50, 100]))
    return TenantPlan(f"tenant{index:03d}", rng.choice([1, 1, 1, 2, 2, 4]), quotas)


def _job_spec(rng: random.Random) -> JobSpec:
    roll = rng.random()
    requires: dict[str, str] = {}
    replicas, gpus = 1, 0
    if roll < 0.06:  # GPU work, mostly pinned to a model
        gpus = rng.choice([1, 1, 2, 4])
        cpu = float(rng.choice([2, 4]))
        memory_mb = rng.choice([16, 32]) * 1024
        if rng.random() < 0.8:
            requires["gpu_model"] = rng.choice(GPU_MODELS)
    elif roll < 0.09:  # a gang
        replicas = rng.randint(2, 8)
        cpu = float(rng.choice([1, 2]))
        memory_mb = int(cpu * 2048)
    else:
        cpu = rng.choices([0.25, 0.5, 1, 2, 4, 8], [4, 4, 4, 2, 1, 0.25])[0]
        memory_mb = max(256, int(cpu * 1024 * rng.choice([1, 2, 4])))
    if gpus == 0 and rng.random() < 0.2:
        requires["zone"] = rng.choice(ZONES)
    priority = rng.choices([Priority.HIGH, Priority.MEDIUM, Priority.LOW], [2, 5, 3])[0]
    preemptible = (
        rng.random() < {Priority.HIGH: 0.0, Priority.MEDIUM: 0.2, Priority.LOW: 0.6}[priority]
    )
    return JobSpec(
        runtime="shell",
        command="true",
        resources=Resources(cpu=cpu, memory_mb=memory_mb, gpus=gpus),
        priority=priority,
        requires=requires,
        preemptible=preemptible,
        replicas=replicas,
    )


def _waited(rng: random.Random) -> float:
    """Mostly recent; 1 % past the 300 s starvation line, some past the 600 s class aging.

    The recent ones stay 100 s short of the line, so none crosses it while the store part
    runs: a run starting to starve changes reasons, and the steady passes would not be.
    """
    if rng.random() < 0.99:
        return rng.uniform(0, 200)
    return rng.uniform(300, 900)


def _worker(
    rng: random.Random,
    filling: random.Random,
    index: int,
    jobs: list[JobPlan],
    load: tuple[float, float],
) -> WorkerPlan:
    labels = {"zone": rng.choice(ZONES)}
    if rng.random() < 0.2:
        cores = rng.choice([32, 64])
        gpus = rng.choice([4, 8])
        memory_mb = rng.choice([256, 512]) * 1024
        labels["gpu_model"] = rng.choice(GPU_MODELS)
    else:
        cores = rng.choices([4, 8, 16, 32, 64], [1, 2, 3, 3, 1])[0]
        gpus = 0
        memory_mb = cores * rng.choice([2048, 4096, 8192])
    if rng.random() < 0.5:
        labels["disk"] = "ssd"
    capacity = Amount(cores * 1000, memory_mb, gpus, rng.randint(16, 32))
    draining = rng.random() < DRAINING_FRACTION
    running = _fill(filling, capacity, labels, jobs, filling.uniform(*load))
    return WorkerPlan(f"worker{index:03d}", capacity, labels, draining, running)


def _fill(
    rng: random.Random,
    capacity: Amount,
    labels: dict[str, str],
    jobs: list[JobPlan],
    fraction: float,
) -> tuple[tuple[int, float], ...]:
    """Single-member jobs that could run here, until cpu or slots reach ``fraction``."""
    target_cpu, target_slots = capacity.cpu_milli * fraction, capacity.slots * fraction
    used = Amount()
    running: list[tuple[int, float]] = []
    for _ in range(200):
        if used.cpu_milli >= target_cpu or used.slots >= target_slots:
            break
        index = rng.randrange(len(jobs))
        job = jobs[index]
        fits_labels = all(labels.get(key) == value for key, value in job.spec.requires.items())
        if job.spec.replicas > 1 or not fits_labels or not job.need.fits_in(capacity - used):
            continue
        used += job.need
        running.append((index, rng.uniform(0, 3600)))
    return tuple(running)
