"""Scenario: a burst (issue 44): 100,000 runs of 100 tenants due at one instant, and how long
until every one of them has started — placed on a worker, its attempt made — through the real
``starter`` and ``dispatcher`` loops, each in a thread of its own as a scheduler runs them, on
PostgreSQL, against 400 registered workers of 256 slots (room for all at once).

The workers are registrations, not agents: no process claims the attempts or runs a job, so
this is the control plane's part of a midnight peak (the brief's 2M runs due at once), not the
spawning of 100,000 processes, which this 2-core box could not do in a minute at any isolation
(the one-off scenario's spawn limits).

    .venv/bin/python -m bench.burst [runs]
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, event, func, insert, select, text

from bench.dispatch_store import TimedPlacement, postgres_database
from bench.oneoff import postmaster_of
from bench.proc import CpuTimes
from herder.clock import Clock, epoch_ms
from herder.control.dispatcher import Dispatcher
from herder.control.starter import Starter
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec, Resources
from herder.domain.lifecycle.changes import Event, NewRun
from herder.domain.placement.policy import Plan
from herder.domain.states import RunState
from herder.store.database import Database
from herder.store.runs.placement import Applied
from herder.store.runs.writes import new_run_row
from herder.store.schema import runs
from herder.store.store import Store

RUNS = 100_000
TENANTS = 100
WORKERS = 400
SLOTS = 256
LEAD_SECONDS = 60.0  # from the runs' making to their instant (making 100,000 takes ~20 s)
INSERT_BATCH = 5_000
TIMEOUT_SECONDS = 600.0
DATABASE = "herder_bench_burst"
OPENING = 90  # characters of a statement that name it in the time spent


@dataclass(frozen=True)
class BurstResult:
    runs: int
    queued_after: float  # from the instant until the last was queued (the starter)
    started_after: float  # until the last was placed (the dispatcher)
    statements: float  # what the loops sent the database, all told
    passes: int  # the dispatcher's passes that placed runs
    snapshot_seconds: float  # their reads, all told
    apply_seconds: float  # their writes (the plan applied), all told
    slowest: list[tuple[str, int, float]]  # statements by their opening: count, seconds
    loops_cpu_seconds: float  # the two loops' process (the bench's counting included)
    database_cpu_seconds: float | None  # the PostgreSQL cluster, when it runs here

    def detail(self) -> str:
        database = (
            "not measured (not on this machine)"
            if self.database_cpu_seconds is None
            else f"{self.database_cpu_seconds:.1f} s"
        )
        return (
            f"queued by the starter {self.queued_after:.1f} s after the instant; placed by "
            f"{self.passes} dispatcher passes ({self.runs / max(self.passes, 1):,.0f} runs a "
            f"pass), which spent {self.snapshot_seconds:.1f} s reading and "
            f"{self.apply_seconds:.1f} s writing; {self.statements:,.0f} statements; CPU: the "
            f"loops' process {self.loops_cpu_seconds:.1f} s, PostgreSQL {database}. The "
            "statements that took longest, all told: "
            + "; ".join(
                f"`{opening}…` {count} times, {seconds:.1f} s"
                for opening, count, seconds in self.slowest
            )
        )

    def line(self) -> str:
        return (
            f"burst: {self.runs} due at one instant, all started after {self.started_after:.1f} s"
        )


def section(result: BurstResult, machine: str, when: datetime, command: str) -> list[str]:
    return [
        f"\n### A burst of runs due at one instant, {when:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `{command}`: {result.runs:,} one-off runs of {TENANTS} tenants "
        f"`scheduled` for one instant on PostgreSQL, {WORKERS} registered workers of {SLOTS} "
        "slots (room for all; registrations, no agents: no job is spawned), the real "
        "`starter` and `dispatcher` loops in threads of their own. Started: placed on a "
        "worker, the attempt made (the run `running`).\n",
        f"**{result.line()}** (target ≤ 60 s)",
        "",
        f"- {result.detail()}.",
    ]


def measure(count: int = RUNS) -> BurstResult:
    with postgres_database(DATABASE) as url:
        store = Store(url)
        try:
            instant = _populate(store, count)
            return _burst(store, count, instant)
        finally:
            store.close()


def _populate(store: Store, count: int) -> datetime:
    """Tenants, a job each, the workers, and the runs ``scheduled`` for one instant."""
    store.migrate()
    spec = JobSpec.model_validate(
        {"runtime": "shell", "command": "true", "resources": {"cpu": 0.01, "memory_mb": 8}}
    )
    jobs = []
    for index in range(TENANTS):
        tenant = store.access.create_tenant(f"tenant-{index}").id
        jobs.append((tenant, store.jobs.create(tenant, "nightly", spec)))
    token = store.access.authenticate_worker_token(store.access.create_worker_token("bench"))
    for index in range(WORKERS):
        store.workers.register(
            token, name=f"w{index}", capacity=Resources(cpu=64, memory_mb=262_144),
            max_slots=SLOTS, labels={}, version="bench",
        )  # fmt: skip
    now = datetime.now(UTC)
    instant = now + timedelta(seconds=LEAD_SECONDS)
    rows = []
    for index in range(count):
        tenant, job = jobs[index % TENANTS]
        run_id = new_id("run", epoch_ms(now))
        new = NewRun(run_id, tenant, job.id, job.name, spec, Event(run_id, "submitted", "bench"),
                     state=RunState.SCHEDULED, run_at=instant)  # fmt: skip
        rows.append(new_run_row(new, now))
    with store.database.write() as connection:
        for start in range(0, len(rows), INSERT_BATCH):
            connection.execute(insert(runs), rows[start : start + INSERT_BATCH])
    with store.database.write() as connection:
        connection.execute(text("ANALYZE"))
    if datetime.now(UTC) >= instant:
        raise RuntimeError(f"making {count} runs took past the {LEAD_SECONDS:g} s lead")
    return instant


def _burst(store: Store, count: int, instant: datetime) -> BurstResult:
    """The two loops in threads of their own until every run is running; the bench counts
    what is left twice a second."""
    stop = threading.Event()
    placement = _Tally(store.database, store.clock)
    timing = StatementTimes(store.database.engine)
    loops = [
        threading.Thread(target=_loop, args=(Starter(store).step, stop), name="starter"),
        threading.Thread(target=_loop, args=(Dispatcher(placement).step, stop), name="dispatcher"),
    ]
    statements_before = _statements()
    postmaster = postmaster_of(store.database)
    database_before = CpuTimes.of_tree(postmaster) if postmaster else None
    cpu_before = time.process_time()
    for loop in loops:
        loop.start()
    queued_after = None
    try:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while True:
            time.sleep(0.5)
            scheduled, running = _counts(store)
            if queued_after is None and scheduled == 0:
                queued_after = (datetime.now(UTC) - instant).total_seconds()
            if running == count:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count - running} runs not started after {TIMEOUT_SECONDS}s")
    finally:
        stop.set()
        for loop in loops:
            loop.join()
    with store.database.read() as connection:
        last = connection.execute(select(func.max(runs.c.started_at))).scalar_one()
    started_after = (last - instant).total_seconds()  # a pass's runs share its ``now``
    return BurstResult(
        runs=count,
        queued_after=queued_after if queued_after is not None else started_after,
        started_after=started_after,
        statements=_statements() - statements_before,
        passes=placement.passes,
        slowest=timing.slowest(5),
        snapshot_seconds=placement.snapshot_seconds,
        apply_seconds=placement.apply_seconds,
        loops_cpu_seconds=time.process_time() - cpu_before,
        database_cpu_seconds=(
            (CpuTimes.of_tree(postmaster) - database_before).total
            if postmaster and database_before
            else None
        ),
    )


class StatementTimes:
    """Where the database time goes: each statement's wall time, summed by its opening."""

    def __init__(self, engine: Engine) -> None:
        self._started: dict[int, float] = {}
        self._spent: dict[str, list[float]] = {}
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, *arguments: Any) -> None:
        self._started[id(arguments[1])] = time.perf_counter()

    def _after(self, *arguments: Any) -> None:
        started = self._started.pop(id(arguments[1]), None)
        if started is not None:
            opening = " ".join(arguments[2].split())[:OPENING]
            self._spent.setdefault(opening, []).append(time.perf_counter() - started)

    def slowest(self, count: int) -> list[tuple[str, int, float]]:
        totals = [(opening, len(times), sum(times)) for opening, times in self._spent.items()]
        return sorted(totals, key=lambda total: -total[2])[:count]


class _Tally(TimedPlacement):
    """The dispatcher's reads and writes, timed and summed over the passes that placed."""

    def __init__(self, database: Database, clock: Clock) -> None:
        super().__init__(database, clock)
        self.passes = 0
        self.snapshot_seconds = self.apply_seconds = 0.0

    def apply(self, plan: Plan, reasons: Mapping[str, str] | None = None) -> Applied:
        applied = super().apply(plan, reasons)
        if applied.placed:
            self.passes += 1
            self.snapshot_seconds += self.timings.snapshot
            self.apply_seconds += self.timings.apply
        return applied


def _loop(step: Callable[[], float], stop: threading.Event) -> None:
    while not stop.is_set():
        stop.wait(min(step(), 1.0))


def _counts(store: Store) -> tuple[int, int]:
    with store.database.read() as connection:
        counted = dict(
            connection.execute(select(runs.c.state, func.count()).group_by(runs.c.state)).all()
        )
    return counted.get(RunState.SCHEDULED, 0), counted.get(RunState.RUNNING, 0)


def _statements() -> float:
    from prometheus_client import REGISTRY

    return sum(
        sample.value
        for family in REGISTRY.collect()
        for sample in family.samples
        if sample.name == "herder_database_statements_total"
    )


if __name__ == "__main__":
    from bench import machine
    from bench.results import append

    result = measure(int(sys.argv[1]) if len(sys.argv) > 1 else RUNS)
    print(result.line())
    print(result.detail())
    command = " ".join(["python -m bench.burst", *sys.argv[1:]])
    append(section(result, machine.describe(), datetime.now(UTC), command))
