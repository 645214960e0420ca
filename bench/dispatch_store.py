"""The dispatch scenario through the store: real ``Dispatcher.step()`` passes on a database
holding the world's tenants, jobs, workers (all idle at first) and queued runs.

The passes come as in production, a full pass every ``FULL_PASS_SECONDS`` on the
dispatcher's clock (which stands still within a pass, so none is paced): the first places
most runs, the second finds the fleet full, the steady ones after it change nothing, and a
last one comes when the dispatcher reads its whole fleet again (``FLEET_REFRESH_SECONDS``).

The repository is wrapped so each pass splits into snapshot read, plan (the rest of the
step: the policy and the dispatcher's own bookkeeping) and apply (with the reasons).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert, text, update

from bench.dispatch_workload import World
from herder.clock import Clock, epoch_ms
from herder.control.dispatcher import FLEET_REFRESH_SECONDS, FULL_PASS_SECONDS, Dispatcher
from herder.domain.ids import new_id
from herder.domain.jobs import Resources
from herder.domain.lifecycle.changes import Event, NewRun
from herder.domain.models import WorkerState
from herder.domain.placement.partitions import Partition
from herder.domain.placement.policy import Plan
from herder.domain.placement.snapshot import Snapshot, WorkerView
from herder.settings import sqlite_url
from herder.store.database import Database
from herder.store.runs.placement import Applied, PlacementRepository
from herder.store.runs.snapshot import QUEUE_WINDOW, TENANT_QUEUE_WINDOW, WHOLE
from herder.store.runs.writes import new_run_row
from herder.store.schema import runs, workers
from herder.store.store import Store

POSTGRES_DATABASE = "herder_bench_dispatch"
STEADY_PASSES = 3  # after the first two: the reasons no longer change, the fleet is kept
INSERT_BATCH = 2_000  # rows per multi-row insert


@dataclass
class StorePass:
    queued: int  # in the pass's snapshot: the decisions it makes
    seconds: float
    snapshot_seconds: float
    apply_seconds: float  # the plan and the changed waiting reasons, one transaction
    placed: int
    preempted: int
    reasons_written: int

    @property
    def plan_seconds(self) -> float:
        return self.seconds - self.snapshot_seconds - self.apply_seconds


@dataclass(frozen=True)
class StoreResult:
    store: str
    setup_seconds: float
    passes: list[StorePass]

    @property
    def steady(self) -> list[StorePass]:
        return self.passes[2 : 2 + STEADY_PASSES]

    @property
    def refresh(self) -> StorePass:
        """The pass that reads the whole fleet again."""
        return self.passes[-1]

    def steady_median(self, attribute: str) -> float:
        return float(statistics.median(getattr(one, attribute) for one in self.steady))


@dataclass
class _Timings:
    queued: int = 0
    snapshot: float = 0.0
    apply: float = 0.0
    placed: int = 0
    preempted: int = 0
    reasons_written: int = 0


class TimedPlacement(PlacementRepository):
    """The real repository, timing each call the dispatcher makes."""

    def __init__(self, database: Database, clock: Clock) -> None:
        super().__init__(database, clock)
        self.timings = _Timings()

    def snapshot(
        self,
        window: int = QUEUE_WINDOW,
        per_tenant: int = TENANT_QUEUE_WINDOW,
        *,
        quick: bool = False,
        fleet: Sequence[WorkerView] | None = None,
        changed: Collection[str] = (),
        partition: Partition = WHOLE,
    ) -> Snapshot:
        started = time.perf_counter()
        result = super().snapshot(
            window, per_tenant, quick=quick, fleet=fleet, changed=changed, partition=partition
        )
        self.timings.snapshot = time.perf_counter() - started
        self.timings.queued = len(result.queued)
        return result

    def apply(self, plan: Plan, reasons: Mapping[str, str] | None = None) -> Applied:
        started = time.perf_counter()
        result = super().apply(plan, reasons)
        self.timings.apply = time.perf_counter() - started
        self.timings.placed, self.timings.preempted = len(result.placed), len(result.preempted)
        self.timings.reasons_written = len(reasons or {})
        return result


def _psql(statement: str) -> None:
    quiet = {**os.environ, "PGOPTIONS": "--client-min-messages=warning"}
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-d", "test", "-qc", statement], check=True, env=quiet
    )


@contextmanager
def postgres_database(name: str) -> Iterator[str]:
    """A fresh PostgreSQL database's URL, dropped afterwards."""
    _psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    _psql(f"CREATE DATABASE {name}")
    try:
        yield f"postgresql://127.0.0.1:5432/{name}"
    finally:
        _psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextmanager
def sqlite_database(home: Path, name: str) -> Iterator[str]:
    """A fresh SQLite database's URL under ``home``, removed afterwards."""
    home.mkdir(parents=True, exist_ok=True)
    try:
        yield sqlite_url(home / f"{name}.db")
    finally:
        for leftover in home.glob(f"{name}.db*"):
            leftover.unlink()


def measure_postgres(world: World, prepare: Callable[[Store], None] | None = None) -> StoreResult:
    """The passes on PostgreSQL; ``prepare`` changes the populated store first."""
    with postgres_database(POSTGRES_DATABASE) as url:
        return _measure("postgresql", url, world, prepare)


def measure_sqlite(world: World, home: Path) -> StoreResult:
    with sqlite_database(home, "dispatch") as url:
        return _measure("sqlite", url, world)


def _measure(
    name: str, url: str, world: World, prepare: Callable[[Store], None] | None = None
) -> StoreResult:
    store = Store(url)
    try:
        started = time.perf_counter()
        store.migrate()
        _populate(store, world)
        if prepare is not None:
            prepare(store)
            _analyze(store)  # as autovacuum would after so many updated rows
        setup_seconds = time.perf_counter() - started
        timed = TimedPlacement(store.database, store.clock)
        clock = [0.0]
        dispatcher = Dispatcher(timed, monotonic=lambda: clock[0])
        moments = [FULL_PASS_SECONDS * (index + 1) for index in range(2 + STEADY_PASSES)]
        moments.append(moments[0] + FLEET_REFRESH_SECONDS)
        passes = []
        for moment in moments:
            clock[0] = moment
            started = time.perf_counter()
            dispatcher.step()
            seconds = time.perf_counter() - started
            took = timed.timings
            passes.append(
                StorePass(
                    took.queued, seconds, took.snapshot, took.apply, took.placed,
                    took.preempted, took.reasons_written,
                )
            )  # fmt: skip
        return StoreResult(name, setup_seconds, passes)
    finally:
        store.close()


def _populate(store: Store, world: World) -> None:
    """Tenants, jobs and workers through the repositories; the queued runs in bulk."""
    tenant_ids = [
        store.access.create_tenant(tenant.name, weight=tenant.weight, quotas=tenant.quotas).id
        for tenant in world.tenants
    ]
    job_ids = [
        store.jobs.create(tenant_ids[job.tenant], job.name, job.spec).id for job in world.jobs
    ]
    token_id = store.access.authenticate_worker_token(store.access.create_worker_token("bench"))
    draining = []
    for plan in world.workers:
        capacity = plan.capacity
        worker, _secret = store.workers.register(
            token_id,
            name=plan.name,
            capacity=Resources(
                cpu=capacity.cpu_milli / 1000, memory_mb=capacity.memory_mb, gpus=capacity.gpus
            ),
            max_slots=capacity.slots,
            labels=plan.labels,
            version="bench",
        )
        if plan.draining:
            draining.append(worker.id)
    now = datetime.now(UTC)
    rows = []
    for run in world.queued:
        job = world.jobs[run.job]
        queued_at = now - timedelta(seconds=run.waited_seconds)
        rows.append(
            new_run_row(
                NewRun(
                    new_id("run", epoch_ms(queued_at)), tenant_ids[job.tenant], job_ids[run.job],
                    job.name, job.spec, Event("", "submitted", "bench"),
                ),
                queued_at,
            )
        )  # fmt: skip
    with store.database.write() as connection:
        connection.execute(
            update(workers).where(workers.c.id.in_(draining)).values(state=WorkerState.DRAINING)
        )
        for start in range(0, len(rows), INSERT_BATCH):
            connection.execute(insert(runs), rows[start : start + INSERT_BATCH])
    _analyze(store)


def _analyze(store: Store) -> None:
    with store.database.write() as connection:
        connection.execute(text("ANALYZE"))
