"""Scenario: pools and the forecast (issue 25).

1. The dispatcher's policy with pools: the dispatch scenario's world (10,000 queued runs of
   100 tenants, 500 workers; fuller and emptier fleets) as it is, and split into 10 pools —
   every worker in one (by index), every run naming one (by its index), every tenant a share
   of every pool (a hundredth of its capacity), a fifth of the running attempts borrowed —
   ``plan()`` timed on both in the same process (median of several passes).
2. The forecast over 1,000,000 schedules on PostgreSQL for the next hour: schedules of 1,000
   jobs of 100 tenants in 10 pools, on 20 cron expressions, bulk-inserted; one
   ``pool_demand`` read (every pool) and one for a single pool, medians of 3.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from sqlalchemy import select, text, update

from bench.dispatch import FLEETS, SEED
from bench.dispatch_store import StoreResult, measure_postgres
from bench.dispatch_workload import make_world
from herder.domain.jobs import JobSpec
from herder.domain.placement import policy
from herder.domain.placement.resources import Amount, total
from herder.domain.placement.snapshot import PoolView, Snapshot
from herder.domain.pools import PoolShare, PoolSpec
from herder.domain.schedules import ScheduleSpec
from herder.store.forecast import pool_demand
from herder.store.schedules import PARTITIONS
from herder.store.schema import runs, tenants, workers
from herder.store.store import Store

POOLS = 10
PASSES = 5
SCHEDULES = 1_000_000
JOBS = 1_000
TENANTS = 100
CRONS = [f"{minute} * * * *" for minute in range(0, 60, 3)]  # 20 expressions
READS = 3


@dataclass(frozen=True)
class PolicyComparison:
    fleet: str
    plain_seconds: float
    pooled_seconds: float
    plain_placed: int
    pooled_placed: int
    pooled_borrowed: int
    pooled_preemptions: int


@dataclass(frozen=True)
class StoreComparison:
    plain: StoreResult
    pooled: StoreResult


@dataclass(frozen=True)
class ForecastResult:
    schedules: int
    groups_note: str
    every_pool_seconds: float
    one_pool_seconds: float


def pooled(snapshot: Snapshot) -> Snapshot:
    """The same world split into pools, each tenant with a share of each."""
    names = [f"pool{index}" for index in range(POOLS)]
    workers = []
    for index, worker in enumerate(snapshot.workers):
        running = tuple(
            replace(attempt, borrowed=number % 5 == 0)
            for number, attempt in enumerate(worker.running)
        )
        workers.append(replace(worker, running=running, pool=names[index % POOLS]))
    capacity = {name: total([w.capacity for w in workers if w.pool == name]) for name in names}
    tenants = list(snapshot.tenants)
    pools = {
        name: PoolView(
            name,
            {
                tenant: Amount(
                    capacity[name].cpu_milli // len(tenants),
                    capacity[name].memory_mb // len(tenants),
                    capacity[name].gpus // len(tenants),
                )
                for tenant in tenants
            },
        )
        for name in names
    }
    queued = tuple(
        replace(run, pool=names[index % POOLS], preemptible=True)
        for index, run in enumerate(snapshot.queued)
    )
    return replace(snapshot, workers=tuple(workers), queued=queued, pools=pools)


def _timed(snapshot: Snapshot) -> tuple[float, policy.Plan]:
    times, decided = [], policy.plan(snapshot)
    for _ in range(PASSES):
        started = time.perf_counter()
        decided = policy.plan(snapshot)
        times.append(time.perf_counter() - started)
    return statistics.median(times), decided


def compare_policy() -> list[PolicyComparison]:
    results = []
    now = datetime.now(UTC)
    for fleet, load in FLEETS.items():
        plain = make_world(SEED, load).snapshot(now)
        plain_seconds, plain_plan = _timed(plain)
        pooled_seconds, pooled_plan = _timed(pooled(plain))
        results.append(
            PolicyComparison(
                fleet,
                plain_seconds,
                pooled_seconds,
                len(plain_plan.placements),
                len(pooled_plan.placements),
                sum(1 for placement in pooled_plan.placements if placement.borrowed),
                len(pooled_plan.preemptions),
            )
        )
    return results


def measure_forecast(url: str) -> ForecastResult:
    store = Store(url)
    store.migrate()
    tenants = [store.access.create_tenant(f"bench-{index}").id for index in range(TENANTS)]
    shares = [PoolShare(tenant_id=tenant_id, cpu=10) for tenant_id in tenants]
    for index in range(POOLS):
        store.pools.create(f"pool{index}", PoolSpec(shares=shares))
    jobs = []
    for index in range(JOBS):
        spec = JobSpec.model_validate(
            {"runtime": "shell", "command": "true", "pool": f"pool{index % POOLS}",
             "resources": {"cpu": 0.5 + index % 4, "memory_mb": 256 * (1 + index % 8)}}
        )  # fmt: skip
        tenant_id = tenants[index % TENANTS]
        jobs.append((tenant_id, store.jobs.create(tenant_id, f"job-{index}", spec).id))
    job_rows = [{"tenant": tenant_id, "job": job_id} for tenant_id, job_id in jobs]
    specs = [json.dumps(ScheduleSpec(cron=cron).model_dump(mode="json")) for cron in CRONS]
    soon = datetime.now(UTC)
    with store.database.write() as connection:
        connection.execute(text("CREATE TEMP TABLE bench_jobs (n int, tenant text, job text)"))
        connection.execute(
            text("INSERT INTO bench_jobs VALUES (:n, :tenant, :job)"),
            [{"n": index, **row} for index, row in enumerate(job_rows)],
        )
        connection.execute(text("CREATE TEMP TABLE bench_specs (n int, spec text)"))
        connection.execute(
            text("INSERT INTO bench_specs VALUES (:n, :spec)"),
            [{"n": index, "spec": spec} for index, spec in enumerate(specs)],
        )
        connection.execute(
            text(
                "INSERT INTO schedules (id, tenant_id, job_id, spec, paused, partition, "
                "next_fire_at, next_due_at, fired_count, missed_count, skipped_count, "
                "created_at, updated_at) "
                "SELECT 'sch_bench' || lpad(g.n::text, 17, '0'), j.tenant, j.job, "
                "CAST(s.spec AS jsonb), false, g.n % :partitions, :next, :next, 0, 0, 0, "
                "now(), now() FROM generate_series(1, :count) AS g(n) "
                "JOIN bench_jobs j ON j.n = g.n % :jobs JOIN bench_specs s ON s.n = g.n % :crons"
            ),
            {"partitions": PARTITIONS, "next": soon, "count": SCHEDULES, "jobs": JOBS,
             "crons": len(CRONS)},
        )  # fmt: skip
        connection.execute(text("ANALYZE schedules"))
    every, one = [], []
    for _ in range(READS):
        with store.database.read() as connection:
            started = time.perf_counter()
            pool_demand(connection, datetime.now(UTC), 60)
            every.append(time.perf_counter() - started)
            started = time.perf_counter()
            pool_demand(connection, datetime.now(UTC), 60, pool="pool3")
            one.append(time.perf_counter() - started)
    store.close()
    note = f"{JOBS:,} jobs x {len(CRONS)} expressions = {JOBS * len(CRONS):,} groups at most"
    return ForecastResult(SCHEDULES, note, statistics.median(every), statistics.median(one))


def split_into_pools(store: Store) -> None:
    """The populated dispatch world, split into 10 pools: workers by index (a label), runs
    by index, every tenant a hundredth of each pool's capacity, every run preemptible."""
    with store.database.write() as connection:
        worker_rows = connection.execute(
            select(workers.c.id, workers.c.labels, workers.c.cpu_milli, workers.c.memory_mb,
                   workers.c.gpus).order_by(workers.c.id)
        ).all()  # fmt: skip
        tenant_ids = list(connection.execute(select(tenants.c.id)).scalars())
        for index, row in enumerate(worker_rows):
            labels = {**(row.labels or {}), "bench_pool": f"pool{index % POOLS}"}
            connection.execute(update(workers).where(workers.c.id == row.id).values(labels=labels))
        run_ids = list(connection.execute(select(runs.c.id).order_by(runs.c.id)).scalars())
        for number in range(POOLS):
            chosen = run_ids[number::POOLS]
            for start in range(0, len(chosen), 1000):
                connection.execute(
                    update(runs)
                    .where(runs.c.id.in_(chosen[start : start + 1000]))
                    .values(pool=f"pool{number}", preemptible=True)
                )
    for number in range(POOLS):
        members = worker_rows[number::POOLS]
        cpu = sum(row.cpu_milli for row in members) / 1000 / len(tenant_ids)
        memory = sum(row.memory_mb for row in members) // len(tenant_ids)
        gpus = sum(row.gpus for row in members) // len(tenant_ids)
        shares = [PoolShare(tenant_id=tenant_id, cpu=round(cpu, 3), memory_mb=memory, gpus=gpus)
                  for tenant_id in tenant_ids]  # fmt: skip
        store.pools.create(
            f"pool{number}", PoolSpec(selector={"bench_pool": f"pool{number}"}, shares=shares)
        )


def compare_store() -> StoreComparison:
    """Real dispatcher passes on PostgreSQL over the world without pools, then split."""
    world = make_world(SEED, (0.0, 0.0))
    return StoreComparison(measure_postgres(world), measure_postgres(world, split_into_pools))
