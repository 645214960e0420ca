"""Scenario: the mission's mix — 80% of runs fired by schedules, 20% submitted as one-offs —
at rising rates, on PostgreSQL with one worker; the highest rate at which every run still
starts within a second.

Each step is a fresh system: ``0.8 * rate`` schedules firing every second (cron with a
seconds field), and one-offs submitted in batches every 100 ms at ``0.2 * rate``, for
``STEP_SECONDS``. A run's start lateness is its ``started_at`` (placed on the worker) minus
its nominal time (the fire it was made for) or, for a one-off, its submission. A step is
sustained when the p99 lateness is at most 1 s; the steps stop at the first that is not.

Each step also counts the CPU each part spent over its window, per run of the window (server:
API and scheduler; the worker's agent; PostgreSQL's whole cluster; the jobs are not in it):
what the estimate of cores per part at the brief's rates multiplies.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import and_, or_, select, text

from bench.oneoff import JOB, Herder, postmaster_of
from bench.proc import CpuTimes
from herder.domain.schedules import ScheduleSpec
from herder.store.database import Database
from herder.store.schedules import PARTITIONS
from herder.store.schema import runs
from herder.worker.isolation import Isolation

RATES = (200, 400, 600, 800, 1000, 1200)
STEP_SECONDS = 15
LEAD_SECONDS = 3  # from set-up to the first fire
SCHEDULED_SHARE = 0.8
SUBMIT_EVERY_SECONDS = 0.1
SUSTAINED_P99_MS = 1000.0
DRAIN_SECONDS = 60
BRIEF_AVERAGE = 1_157  # runs/s: 100M a day


@dataclass(frozen=True)
class MixStep:
    rate: int  # asked for, runs/s
    started_per_second: float  # runs of the window started, per second of the window
    p50_ms: float
    p99_ms: float
    unstarted: int  # runs of the window still not started after the drain
    cpu_ms: dict[str, float]  # per run of the window, by part: server, agent, PostgreSQL

    @property
    def sustained(self) -> bool:
        return self.unstarted == 0 and self.p99_ms <= SUSTAINED_P99_MS


def measure(
    fresh_database: Callable[[], str], home: Path, isolation: Isolation = Isolation.NONE
) -> list[MixStep]:
    steps = []
    for rate in RATES:
        step = _step(rate, fresh_database(), home / f"mix-{rate}", isolation)
        steps.append(step)
        print(
            f"mix {rate}/s: started {step.started_per_second:.0f}/s, start lateness p50 "
            f"{step.p50_ms:.0f} ms, p99 {step.p99_ms:.0f} ms, unstarted {step.unstarted}"
        )
        if not step.sustained:
            break
    return steps


def highest_sustained(steps: list[MixStep]) -> int | None:
    sustained = [step.rate for step in steps if step.sustained]
    return max(sustained) if sustained else None


def _step(rate: int, database_url: str, home: Path, isolation: Isolation) -> MixStep:
    home.mkdir(parents=True)
    herder = Herder(home, database_url, isolation)
    herder.environment["HERDER_CRON_SECONDS"] = "1"
    database = Database(database_url)
    try:
        with herder, herder.client() as client:
            job = client.create_job("mix", JOB)
            client.wait(client.start_run(job.id).id, timeout=30)  # warm: worker registered
            start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=LEAD_SECONDS)
            end = start + timedelta(seconds=STEP_SECONDS)
            _insert_schedules(database, job.id, round(rate * SCHEDULED_SHARE), start)
            parts = _parts(herder, database)
            before = _cpu(parts)
            _submit_until(client.start_runs, job.id, rate * (1 - SCHEDULED_SHARE), start, end)
            spent = {part: _cpu(parts)[part] - seconds for part, seconds in before.items()}
            _stop_schedules(database)
            return _lateness(database, rate, start, end, spent)
    finally:
        database.dispose()


def _parts(herder: Herder, database: Database) -> dict[str, Callable[[], float]]:
    """CPU seconds so far of each part of the control plane."""
    server_pid, worker_pid = (process.pid for process in herder.processes)
    postmaster = postmaster_of(database)
    assert postmaster is not None, "the mix runs on a local PostgreSQL"
    return {
        "server": lambda: CpuTimes.of_tree(server_pid).total,
        "agent": lambda: CpuTimes.of_root_and_rest(worker_pid).own,
        "PostgreSQL": lambda: CpuTimes.of_tree(postmaster).total,
    }


def _cpu(parts: dict[str, Callable[[], float]]) -> dict[str, float]:
    return {part: seconds() for part, seconds in parts.items()}


def _insert_schedules(database: Database, job_id: str, count: int, first: datetime) -> None:
    """Every-second schedules of the job, first due at ``first``, in one statement."""
    spec = ScheduleSpec(cron="* * * * * *").model_dump(mode="json")
    with database.write() as connection:
        tenant_id = connection.execute(
            text("SELECT tenant_id FROM jobs WHERE id = :job"), {"job": job_id}
        ).scalar_one()
        connection.execute(
            text(
                "INSERT INTO schedules (id, tenant_id, job_id, spec, paused, partition, "
                "next_fire_at, next_due_at, fired_count, missed_count, skipped_count, "
                "created_at, updated_at) "
                "SELECT 'sch_mix' || lpad(n::text, 19, '0'), :tenant, :job, "
                "CAST(:spec AS jsonb), false, n % :partitions, :first, :first, 0, 0, 0, "
                "now(), now() FROM generate_series(1, :count) AS n"
            ),
            {
                "tenant": tenant_id, "job": job_id, "spec": json.dumps(spec),
                "partitions": PARTITIONS, "first": first, "count": count,
            },
        )  # fmt: skip
    with database.write() as connection:  # wake the firers now, not at their next poll
        database.notify(connection, "herder_due")


def _submit_until(
    start_runs: Callable[[str, int], list[str]],
    job_id: str,
    per_second: float,
    start: datetime,
    end: datetime,
) -> None:
    """One-offs in batches every ``SUBMIT_EVERY_SECONDS`` from ``start`` to ``end``, at
    ``per_second`` on average (carrying fractions over)."""
    while datetime.now(UTC) < start:
        time.sleep(0.01)
    owed = 0.0
    tick = time.monotonic()
    while datetime.now(UTC) < end:
        owed += per_second * SUBMIT_EVERY_SECONDS
        if owed >= 1:
            start_runs(job_id, int(owed))
            owed -= int(owed)
        tick += SUBMIT_EVERY_SECONDS
        time.sleep(max(0.0, tick - time.monotonic()))


def _stop_schedules(database: Database) -> None:
    with database.write() as connection:
        connection.execute(text("UPDATE schedules SET next_fire_at = NULL, next_due_at = NULL"))


def _lateness(
    database: Database, rate: int, start: datetime, end: datetime, spent: dict[str, float]
) -> MixStep:
    """Start lateness of the window's runs, after they have had time to start."""
    deadline = time.monotonic() + DRAIN_SECONDS
    while True:
        with database.read() as connection:
            rows = connection.execute(
                select(runs.c.scheduled_for, runs.c.created_at, runs.c.started_at).where(
                    or_(
                        and_(runs.c.scheduled_for >= start, runs.c.scheduled_for < end),
                        and_(
                            runs.c.scheduled_for.is_(None),
                            runs.c.created_at >= start,
                            runs.c.created_at < end,
                        ),
                    )
                )
            ).all()
        unstarted = sum(1 for row in rows if row.started_at is None)
        if unstarted == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    lateness = sorted(
        (row.started_at - (row.scheduled_for or row.created_at)).total_seconds() * 1000
        for row in rows
        if row.started_at is not None
    )
    in_window = sum(1 for row in rows if row.started_at is not None and row.started_at < end)
    cpu_ms = {part: 1000 * seconds / max(1, in_window) for part, seconds in spent.items()}
    if not lateness:
        return MixStep(rate, 0.0, float("inf"), float("inf"), unstarted, cpu_ms)
    return MixStep(
        rate=rate,
        started_per_second=in_window / STEP_SECONDS,
        p50_ms=statistics.median(lateness),
        p99_ms=lateness[min(len(lateness) - 1, round(0.99 * (len(lateness) - 1)))],
        unstarted=unstarted,
        cpu_ms=cpu_ms,
    )


def section(steps: list[MixStep], machine: str, when: str) -> list[str]:
    best = highest_sustained(steps)
    verdict = f"**{best}/s**" if best is not None else "**none of the steps**"
    lines = [
        f"\n### The mission's mix, {when} UTC\n",
        f"Machine: {machine}. PostgreSQL, one `herder server --with-scheduler`, one worker at "
        f"`--isolation none`; {SCHEDULED_SHARE:.0%} of runs fired by every-second schedules, "
        f"the rest one-offs in batches every {SUBMIT_EVERY_SECONDS * 1000:.0f} ms; "
        f"{STEP_SECONDS} s per step. Highest rate with start lateness p99 ≤ 1 s: {verdict} "
        "(the brief's average: 1,157/s).\n",
        "| asked | started in the window | lateness p50 | p99 | unstarted after the drain "
        "| sustained | server ms/run | agent ms/run | PostgreSQL ms/run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for step in steps:
        lines.append(
            f"| {step.rate}/s | {step.started_per_second:.0f}/s | {step.p50_ms:.0f} ms "
            f"| {step.p99_ms:.0f} ms | {step.unstarted} | {'yes' if step.sustained else 'no'} "
            + "".join(f"| {ms:.2f} " for ms in step.cpu_ms.values())
            + "|"
        )
    return lines + _estimate(steps)


def _estimate(steps: list[MixStep]) -> list[str]:
    """Cores each part would need at the brief's average, from the CPU per run of the
    highest sustained step (the least idle overhead per run among those that held)."""
    held = [step for step in steps if step.sustained]
    if not held:
        return []
    basis = max(held, key=lambda step: step.rate)
    cores = {part: BRIEF_AVERAGE * ms / 1000 for part, ms in basis.cpu_ms.items()}
    named = ", ".join(f"{part} {count:.1f}" for part, count in cores.items())
    return [
        "",
        f"At the brief's average of {BRIEF_AVERAGE:,} runs/s, the CPU per run of the "
        f"{basis.rate}/s step asks for cores: {named} ({sum(cores.values()):.1f} in all, "
        "before the jobs themselves and any headroom).",
    ]
