"""Scenario: placement partitioned over 1, 2 and 4 dispatchers (issue 44 §4): how fast a
queue of runs spread over four pools is placed, and what a placement costs in CPU.

Each count starts from a fresh PostgreSQL database holding ``TENANTS`` tenants, four pools
(each with a share for every tenant) of ``WORKERS_PER_POOL`` registered workers, and ``RUNS``
queued one-off runs spread evenly over the pools: room for all at once. Then that many
dispatcher processes start together, each with its partition (``HERDER_DISPATCH_PARTITIONS``
as a cell would run them: four pools and an empty shared fleet deal evenly over 1, 2 and 4),
and step until every run is placed. The workers are registrations, not agents: this is the
control plane's part of a burst, as ``bench.burst`` measures it for one dispatcher.

    .venv/bin/python -m bench.dispatchers [runs]
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.synchronize import Event as ProcessEvent

from sqlalchemy import func, insert, select, text

from bench.dispatch_store import postgres_database
from bench.oneoff import postmaster_of
from bench.proc import CpuTimes
from herder.clock import epoch_ms
from herder.control.dispatcher import Dispatcher
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec, Resources
from herder.domain.lifecycle.changes import Event, NewRun
from herder.domain.placement.partitions import Partition
from herder.domain.pools import PoolShare, PoolSpec
from herder.domain.states import RunState
from herder.store.runs.writes import new_run_row
from herder.store.schema import runs
from herder.store.store import Store

RUNS = 20_000
TENANTS = 20
POOLS = ("p1", "p2", "p3", "p4")
WORKERS_PER_POOL = 50
SLOTS = 128
COUNTS = (1, 2, 4)
INSERT_BATCH = 5_000
TIMEOUT_SECONDS = 300.0
DATABASE = "herder_bench_dispatchers"
PEAK_RUNS = 2_000_000  # the brief's midnight: due at once, to start within a minute
PEAK_SECONDS = 60.0


@dataclass(frozen=True)
class Partitioned:
    dispatchers: int
    runs: int
    seconds: float  # from the dispatchers' go until the last run was placed
    dispatcher_cpu_seconds: float  # all of them, their passes
    database_cpu_seconds: float | None  # the PostgreSQL cluster, when it runs here

    @property
    def per_second(self) -> float:
        return self.runs / self.seconds

    @property
    def cpu_ms(self) -> float:
        """Control-plane CPU per placement: the dispatchers' and PostgreSQL's."""
        return (self.dispatcher_cpu_seconds + (self.database_cpu_seconds or 0)) * 1000 / self.runs

    def part(self) -> str:
        database = (
            "" if self.database_cpu_seconds is None
            else f", PostgreSQL {self.database_cpu_seconds * 1000 / self.runs:.2f}"
        )  # fmt: skip
        return (
            f"{self.dispatchers} → {self.per_second:,.0f} placements/s (CPU a placement "
            f"{self.cpu_ms:.2f} ms: dispatchers "
            f"{self.dispatcher_cpu_seconds * 1000 / self.runs:.2f}{database})"
        )


def line(results: list[Partitioned]) -> str:
    return "dispatchers: " + "; ".join(result.part() for result in results)


def projection(results: list[Partitioned]) -> str:
    """What the brief's peak needs, from the best rate a dispatcher reached and the CPU a
    placement cost with the most dispatchers (assuming partitions scale on cores to spare)."""
    rate = max(result.per_second / result.dispatchers for result in results)
    cpu_ms = results[-1].cpu_ms
    needed = PEAK_RUNS / PEAK_SECONDS
    return (
        f"{PEAK_RUNS:,} runs due at once, started within {PEAK_SECONDS:g} s, need "
        f"{needed:,.0f} placements/s: at {rate:,.0f} a dispatcher, {needed / rate:,.0f} "
        f"dispatchers (as many partitions: pools) and {needed * cpu_ms / 1000:,.0f} cores of "
        "control plane (dispatchers and PostgreSQL, at this box's CPU a placement)"
    )


def section(results: list[Partitioned], machine: str, when: datetime, command: str) -> list[str]:
    return [
        f"\n### Placement partitioned over dispatchers, {when:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `{command}`: {RUNS:,} queued one-off runs of {TENANTS} tenants "
        f"over {len(POOLS)} pools of {WORKERS_PER_POOL} registered workers ({SLOTS} slots; "
        "room for all; no agents) on PostgreSQL; each count from a fresh database, its "
        "dispatchers in processes of their own, one partition each.\n",
        f"**{line(results)}**",
        "",
        f"- Projection: {projection(results)}.",
    ]


def measure(count: int = RUNS) -> list[Partitioned]:
    return [_measure(dispatchers, count) for dispatchers in COUNTS]


def _measure(dispatchers: int, count: int) -> Partitioned:
    with postgres_database(DATABASE) as url:
        store = Store(url)
        try:
            _populate(store, count)
            return _place(store, url, dispatchers, count)
        finally:
            store.close()


def _populate(store: Store, count: int) -> None:
    store.migrate()
    tenants = [store.access.create_tenant(f"tenant-{index}").id for index in range(TENANTS)]
    shares = [PoolShare(tenant_id=tenant, cpu=10_000, memory_mb=10**8) for tenant in tenants]
    for pool in POOLS:
        store.pools.create(pool, PoolSpec(selector={"pool": pool}, shares=shares))
    token = store.access.authenticate_worker_token(store.access.create_worker_token("bench"))
    for pool in POOLS:
        for index in range(WORKERS_PER_POOL):
            store.workers.register(
                token, name=f"{pool}-{index}", capacity=Resources(cpu=64, memory_mb=262_144),
                max_slots=SLOTS, labels={"pool": pool}, version="bench",
            )  # fmt: skip
    jobs = []
    for tenant in tenants:
        for pool in POOLS:
            resources = {"cpu": 0.01, "memory_mb": 8}
            spec = JobSpec.model_validate(
                {"runtime": "shell", "command": "true", "pool": pool, "resources": resources}
            )
            jobs.append((tenant, spec, store.jobs.create(tenant, f"work-{pool}", spec)))
    now = datetime.now(UTC)
    rows = []
    for index in range(count):
        tenant, spec, job = jobs[index % len(jobs)]
        run_id = new_id("run", epoch_ms(now))
        event = Event(run_id, "submitted", "bench")
        rows.append(new_run_row(NewRun(run_id, tenant, job.id, job.name, spec, event), now))
    with store.database.write() as connection:
        for start in range(0, len(rows), INSERT_BATCH):
            connection.execute(insert(runs), rows[start : start + INSERT_BATCH])
    with store.database.write() as connection:
        connection.execute(text("ANALYZE"))


def _place(store: Store, url: str, dispatchers: int, count: int) -> Partitioned:
    """Start the dispatchers, and once each has loaded, let them go together: the time and
    CPU counted are their passes', not their processes' start."""
    context = multiprocessing.get_context("spawn")
    go, stop = context.Event(), context.Event()
    ready, spent = context.Queue(), context.Queue()
    processes = [
        context.Process(
            target=_dispatch, args=(url, Partition(number, dispatchers), go, stop, ready, spent)
        )
        for number in range(dispatchers)
    ]
    for process in processes:
        process.start()
    try:
        for _ in processes:
            ready.get(timeout=120)
        postmaster = postmaster_of(store.database)
        database_before = CpuTimes.of_tree(postmaster) if postmaster else None
        began = time.monotonic()
        go.set()
        deadline = began + TIMEOUT_SECONDS
        while _running(store) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not all {count} runs placed after {TIMEOUT_SECONDS:g} s")
            time.sleep(0.02)
        seconds = time.monotonic() - began
        database = (
            (CpuTimes.of_tree(postmaster) - database_before).total
            if postmaster and database_before
            else None
        )
    finally:
        go.set()
        stop.set()
        cpu = sum(spent.get(timeout=60) for _ in processes)
        for process in processes:
            process.join(60)
    return Partitioned(dispatchers, count, seconds, cpu, database)


def _dispatch(
    url: str,
    partition: Partition,
    go: ProcessEvent,
    stop: ProcessEvent,
    ready: multiprocessing.Queue[int],
    spent: multiprocessing.Queue[float],
) -> None:
    """One dispatcher process: loaded, it says so; told to go, its partition's passes until
    told to stop; then the CPU time its passes took."""
    store = Store(url)
    dispatcher = Dispatcher(store.placement, partition=partition)
    ready.put(partition.number)
    go.wait()
    began = time.process_time()
    try:
        while not stop.is_set():
            stop.wait(min(dispatcher.step(), 0.05))
    finally:
        spent.put(time.process_time() - began)
        store.close()


def _running(store: Store) -> int:
    with store.database.read() as connection:
        running: int = connection.execute(
            select(func.count()).where(runs.c.state == RunState.RUNNING)
        ).scalar_one()
    return running


if __name__ == "__main__":
    from bench import machine
    from bench.results import append

    results = measure(int(sys.argv[1]) if len(sys.argv) > 1 else RUNS)
    print(line(results))
    print(projection(results))
    command = " ".join(["python -m bench.dispatchers", *sys.argv[1:]])
    append(section(results, machine.describe(), datetime.now(UTC), command))
