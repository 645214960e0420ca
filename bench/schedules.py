"""Scenario 2: firing at scale (issue 4).

1,000,000 schedules stored (bulk-inserted), 10,000 of them due in the same minute: how long
from the due instant until all 10,000 runs are queued, their lateness p50/p99, and the peak
memory of the scheduler process. Then a steady 100 fires/s (100 every-second schedules) and
its lateness. PostgreSQL only: that is where a million schedules live.

While iterating, smaller sizes and a shorter lead to the due instant come from the
environment: ``BENCH_SCHEDULES_STORED``, ``BENCH_SCHEDULES_DUE``, ``BENCH_SCHEDULES_LEAD``
(seconds; the due instant is a whole minute at least that far ahead).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import func, select, text

from herder.domain.errors import TemporarilyUnavailable
from herder.domain.jobs import JobSpec
from herder.domain.schedules import ScheduleSpec
from herder.store.schedules import PARTITIONS
from herder.store.schema import runs
from herder.store.store import Store

STORED = int(os.environ.get("BENCH_SCHEDULES_STORED", "1000000"))
DUE_TOGETHER = int(os.environ.get("BENCH_SCHEDULES_DUE", "10000"))
LEAD_SECONDS = float(os.environ.get("BENCH_SCHEDULES_LEAD", "60"))  # a million rows to set up
STEADY_SCHEDULES = 100
FAR = datetime(2027, 1, 1, tzinfo=UTC)  # when the stored schedules that are not due fire
QUIET_TRIES = 10
STEADY_SECONDS = 20


@dataclass(frozen=True)
class ScheduleResult:
    stored: int
    due: int
    all_queued_seconds: float
    lateness_p50_ms: float
    lateness_p99_ms: float
    peak_memory_mb: float
    steady_rate: float
    steady_p50_ms: float
    steady_p99_ms: float


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _bulk_insert(store: Store, tenant_id: str, job_id: str, due: datetime) -> None:
    """A million rows in one statement per kind; the due ones fire every minute at ``due``."""
    far = FAR
    kinds = [
        (DUE_TOGETHER, ScheduleSpec(cron="* * * * *"), due),
        (STORED - DUE_TOGETHER, ScheduleSpec(cron="0 0 1 1 *"), far),
    ]
    offset = 0
    with store.database.write() as connection:
        for count, spec, next_fire in kinds:
            connection.execute(
                text(
                    "INSERT INTO schedules (id, tenant_id, job_id, spec, paused, partition, "
                    "next_fire_at, next_due_at, fired_count, missed_count, skipped_count, "
                    "created_at, updated_at) "
                    "SELECT 'sch_bench' || lpad((n + :offset)::text, 17, '0'), :tenant, :job, "
                    "CAST(:spec AS jsonb), false, (n + :offset) % :partitions, :next, :next, "
                    "0, 0, 0, now(), now() FROM generate_series(1, :count) AS n"
                ),
                {
                    "offset": offset, "tenant": tenant_id, "job": job_id,
                    "spec": json.dumps(spec.model_dump(mode="json")),
                    "partitions": PARTITIONS, "next": next_fire, "count": count,
                },
            )  # fmt: skip
            offset += count
        connection.execute(text("ANALYZE schedules"))


def _peak_memory_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _lateness_ms(store: Store, since: datetime) -> list[float]:
    with store.database.read() as connection:
        rows = connection.execute(
            select(runs.c.created_at, runs.c.scheduled_for).where(
                runs.c.schedule_id.is_not(None), runs.c.scheduled_for >= since
            )
        ).all()
    return [(created - nominal).total_seconds() * 1000 for created, nominal in rows]


def _count_runs(store: Store, since: datetime) -> int:
    with store.database.read() as connection:
        return int(
            connection.execute(
                select(func.count()).select_from(runs).where(runs.c.scheduled_for >= since)
            ).scalar_one()
        )


def _quiet_the_due(store: Store) -> None:
    """Stop the due schedules firing (the rest fire next year). The firer claims fires of
    the same rows meanwhile, so the two can deadlock: tried again, as a client would."""
    for _ in range(QUIET_TRIES):
        try:
            with store.database.write() as connection:
                connection.execute(
                    text(
                        "UPDATE schedules SET next_fire_at = NULL, next_due_at = NULL "
                        "WHERE next_due_at < :far"
                    ),
                    {"far": FAR},
                )
            return
        except TemporarilyUnavailable:
            time.sleep(0.5)
    raise RuntimeError(f"the due schedules could not be quieted in {QUIET_TRIES} tries")


def measure(database_url: str, home: Path) -> ScheduleResult:
    store = Store(database_url)
    store.migrate()
    tenant = store.access.create_tenant("bench")
    job = store.jobs.create(tenant.id, "tick", JobSpec(runtime="shell", command="true"))
    now = datetime.now(UTC)
    due = (now + timedelta(seconds=LEAD_SECONDS + 60)).replace(second=0, microsecond=0)
    _bulk_insert(store, tenant.id, job.id, due)
    environment = {
        **os.environ, "HERDER_DATABASE_URL": database_url, "HERDER_HOME": str(home),
        "HERDER_CRON_SECONDS": "1",
    }  # fmt: skip
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "herder.cli", "scheduler"], env=environment,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while datetime.now(UTC) < due:
            time.sleep(0.2)
        while _count_runs(store, due) < DUE_TOGETHER:
            time.sleep(0.1)
        queued_after = (datetime.now(UTC) - due).total_seconds()
        lateness = _lateness_ms(store, due)
        peak = _peak_memory_mb(scheduler.pid)
        _quiet_the_due(store)  # then go steady
        steady_start = datetime.now(UTC) + timedelta(seconds=2)
        expression = ScheduleSpec(cron="* * * * * *")
        first = steady_start.replace(microsecond=0) + timedelta(seconds=1)
        for _ in range(STEADY_SCHEDULES):
            store.schedules.create(tenant.id, job.id, expression, first)
        time.sleep(STEADY_SECONDS + 3)
        steady = [value for value in _lateness_ms(store, first)]
        steady_rate = len(steady) / STEADY_SECONDS
    finally:
        scheduler.terminate()
        scheduler.wait(30)
        store.close()
    return ScheduleResult(
        stored=STORED,
        due=DUE_TOGETHER,
        all_queued_seconds=queued_after,
        lateness_p50_ms=statistics.median(lateness),
        lateness_p99_ms=_percentile(lateness, 0.99),
        peak_memory_mb=peak,
        steady_rate=steady_rate,
        steady_p50_ms=statistics.median(steady),
        steady_p99_ms=_percentile(steady, 0.99),
    )
