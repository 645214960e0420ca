"""Scenario: how close the forecast comes to what then ran (issue 25), on a mix like the mix
scenario's: most runs fired by schedules, the rest one-offs the forecast cannot know.

One server and one worker (PostgreSQL, isolation none). Two jobs of known length (``sleep 2``
and ``sleep 20``) run three times each first, so the forecast has their history. Then
schedules of them fire every minute and every other minute, and one-offs are submitted
through the same minutes at a quarter of the scheduled rate (a fifth of all runs). The
forecast is read once, before the first fire; after ``MINUTES`` minutes the attempts give
what really happened: per minute, the runs started and the cpu busy at the minute's peak.
The error is the forecast's against the actual, per minute.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select

from bench.oneoff import Herder
from herder.client import HerderClient
from herder.domain.forecast import MINUTE
from herder.store.database import Database
from herder.store.schema import attempts
from herder.worker.isolation import Isolation

MINUTES = 3
SHORT, LONG = "sleep 2", "sleep 20"
EVERY_MINUTE_SHORT, EVERY_MINUTE_LONG, EVERY_OTHER_SHORT = 40, 8, 20
HISTORY_RUNS = 3


@dataclass(frozen=True)
class MinuteComparison:
    at: datetime
    forecast_starting: int
    actual_starting: int
    forecast_cpu: float
    actual_cpu: float


@dataclass(frozen=True)
class AccuracyResult:
    minutes: list[MinuteComparison]
    one_offs: int

    @property
    def cpu_error(self) -> float:
        """Mean absolute error of the peak busy cpu, as a share of the actual."""
        return statistics.mean(
            abs(m.forecast_cpu - m.actual_cpu) / m.actual_cpu for m in self.minutes if m.actual_cpu
        )


def _job(cpu: float, command: str) -> dict[str, object]:
    return {"runtime": "shell", "command": command, "resources": {"cpu": cpu, "memory_mb": 32}}


def measure(database_url: str, home: Path) -> AccuracyResult:
    home.mkdir(parents=True, exist_ok=True)
    herder = Herder(home, database_url, Isolation.NONE)
    database = Database(database_url)
    try:
        with herder, herder.client() as client:
            short = client.create_job("short", _job(0.01, SHORT))
            long = client.create_job("long", _job(0.02, LONG))
            for job in (short, long):
                for _ in range(HISTORY_RUNS):
                    client.wait(client.start_run(job.id).id, timeout=120)
            for count, job, cron in ((EVERY_MINUTE_SHORT, short, "* * * * *"),
                                     (EVERY_MINUTE_LONG, long, "* * * * *"),
                                     (EVERY_OTHER_SHORT, short, "*/2 * * * *")):  # fmt: skip
                for _ in range(count):
                    client.create_schedule(job.id, {"cron": cron})
            first = datetime.now(UTC).replace(second=0, microsecond=0) + MINUTE
            foretold = client.forecast(minutes=MINUTES + 2).minutes
            one_offs = _one_offs_until(client, short.id, first, first + MINUTES * MINUTE)
            _sleep_until(first + MINUTES * MINUTE + timedelta(seconds=25))  # the long ones end
            actual = _actual(database, first)
            compared = []
            for index in range(MINUTES):
                at = first + index * MINUTE
                predicted = next(minute for minute in foretold if minute.at == at)
                started, cpu = actual[index]
                compared.append(
                    MinuteComparison(at, predicted.runs_starting, started, predicted.cpu, cpu)
                )
            return AccuracyResult(compared, one_offs)
    finally:
        database.dispose()


def _sleep_until(moment: datetime) -> None:
    time.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()))


def _one_offs_until(client: HerderClient, job_id: str, start: datetime, end: datetime) -> int:
    """A quarter of the scheduled rate as one-offs, spread over the minutes."""
    per_minute = int((EVERY_MINUTE_SHORT + EVERY_MINUTE_LONG + EVERY_OTHER_SHORT / 2) // 4)
    submitted = 0
    moment = start + timedelta(seconds=15)
    while moment < end:
        _sleep_until(moment)
        client.start_runs(job_id, per_minute)
        submitted += per_minute
        moment += MINUTE
    return submitted


def _actual(database: Database, first: datetime) -> list[tuple[int, float]]:
    """Per minute from ``first``: attempts started, and cpu busy at the minute's peak."""
    with database.read() as connection:
        rows = connection.execute(
            select(attempts.c.started_at, attempts.c.finished_at, attempts.c.cpu_milli).where(
                attempts.c.started_at >= first - timedelta(minutes=1)
            )
        ).all()
    result = []
    for index in range(MINUTES):
        start, end = first + index * MINUTE, first + (index + 1) * MINUTE
        started = sum(1 for row in rows if start <= row.started_at < end)
        changes = []
        for row in rows:
            stop = row.finished_at or end
            if row.started_at < end and stop > start:
                changes += [(max(row.started_at, start), row.cpu_milli), (stop, -row.cpu_milli)]
        busy = peak = 0
        for _, delta in sorted(changes, key=lambda change: (change[0], change[1])):
            busy += delta
            peak = max(peak, busy)
        result.append((started, peak / 1000))
    return result


def section(result: AccuracyResult, machine: str, when: datetime) -> list[str]:
    lines = [
        f"\n### Forecast against what ran, {when:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `python -m bench.run --scenario forecast-accuracy`: one server "
        f"and one worker (PostgreSQL, isolation none); {EVERY_MINUTE_SHORT} + "
        f"{EVERY_OTHER_SHORT / 2:.0f} `{SHORT}` and {EVERY_MINUTE_LONG} `{LONG}` schedule fires "
        f"a minute on average, and {result.one_offs // MINUTES} one-offs a minute the "
        "forecast cannot know; the forecast read before the first fire.\n",
        "| minute | runs starting: forecast / actual | cpu busy at peak: forecast / actual |",
        "|---|---|---|",
    ]
    for minute in result.minutes:
        lines.append(
            f"| {minute.at:%H:%M} | {minute.forecast_starting} / {minute.actual_starting} "
            f"| {minute.forecast_cpu:g} / {minute.actual_cpu:g} |"
        )
    lines += ["", f"Mean error of the peak busy cpu: **{result.cpu_error:.0%}** of the actual."]
    return lines
