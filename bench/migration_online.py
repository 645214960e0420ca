"""Migration 0015's conversion of a PostgreSQL history while a server of the revision before
goes on writing: how long it takes, how fast it copies, and how long any write waited.

    .venv/bin/python -m bench.migration_online [runs]     (default 1,000,000)
    .venv/bin/python -m bench.run --scenario migration

A database of its own on ``HERDER_BENCH_POSTGRES_URL`` (default the local server) is
migrated to 0014 and filled with ``runs`` ended runs, each with one attempt and two events
(``bench.history_load.fill``), then migrated to 0015 while ``OldServerLoad`` writes: runs
submitted with their attempt, event and log chunk, runs and attempts moved, log chunks
deleted. Measured: the migration's wall time, the history rows it moved a second, the
longest load statement (the longest any write was held up), and the longest wait for a lock
of a load statement seen in ``pg_stat_activity`` (sampled every 20 ms). The line is printed
and appended to bench/RESULTS.md with the rest.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
from alembic import command

from bench import machine
from bench.history_load import APPLICATION, KEYS, LoadReport, OldServerLoad, fill
from bench.results import append
from herder.store.database import Database
from herder.store.migrations import alembic_config

SERVER = os.environ.get("HERDER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432")
DATABASE = "herder_bench_migration"
DEFAULT_RUNS = 1_000_000
SAMPLE_SECONDS = 0.02
_WAITING = (
    "SELECT coalesce(max(clock_timestamp() - query_start), '0') FROM pg_stat_activity"
    " WHERE application_name = %s AND wait_event_type = 'Lock'"
)


@dataclass
class MigrationResult:
    runs: int
    fill_seconds: float
    seconds: float
    rows: int  # in the history tables once converted
    load: LoadReport
    longest_lock_wait_ms: float

    def line(self) -> str:
        return (
            f"migration: {self.runs} runs converted in {self.seconds:.0f} s, longest blocked"
            f" statement {self.load.longest_ms:.0f} ms, load statements"
            f" {self.load.statements}, errors {len(self.load.errors)}"
        )


def measure(runs: int) -> MigrationResult:
    url = f"{SERVER}/{DATABASE}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{DATABASE}"')
    database = Database(url)
    try:
        command.upgrade(alembic_config(database), "0014")
        fill_seconds = fill(url, runs, datetime.now(UTC))
        print(f"filled {runs:,} runs in {fill_seconds:.0f} s", flush=True)
        load, waits = OldServerLoad(url, keep_rows=False), LockWaits(url)
        load.start()
        waits.start()
        began = time.monotonic()
        try:
            command.upgrade(alembic_config(database), "0015")
        finally:
            seconds = time.monotonic() - began
            report, longest_wait = load.stop(), waits.stop()
        with psycopg.connect(url) as connection:
            rows = sum(_count(connection, table) for table in KEYS)
    finally:
        database.dispose()
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    return MigrationResult(runs, fill_seconds, seconds, rows, report, longest_wait)


class LockWaits:
    """The longest a load statement has been seen waiting for a lock, sampled."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._stop = threading.Event()
        self._longest_ms = 0.0
        self._thread = threading.Thread(target=self._sample, name="lock-waits", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self._longest_ms

    def _sample(self) -> None:
        with psycopg.connect(self._url, autocommit=True) as connection:
            while not self._stop.wait(SAMPLE_SECONDS):
                found = connection.execute(_WAITING, (APPLICATION,)).fetchone()
                waited = found[0].total_seconds() * 1000 if found else 0.0
                self._longest_ms = max(self._longest_ms, waited)


def _count(connection: psycopg.Connection[tuple[int]], table: str) -> int:
    found = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
    return found[0] if found else 0


def section(result: MigrationResult, described: str, now: datetime, command: str) -> list[str]:
    load = result.load
    return [
        f"\n### The history converted online under load, {now:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {described}. `{command}`.\n",
        f"**{result.line()}**\n",
        f"- {result.runs:,} ended runs at revision 0014, each with one attempt and two events"
        f" (a log chunk every tenth, a compacted log every hundredth), made in SQL in"
        f" {result.fill_seconds:.0f} s; migrated to 0015 (`store/history/conversion.py`) in"
        f" {result.seconds:.1f} s: {result.rows:,} history rows,"
        f" {result.rows / result.seconds:,.0f} rows/s.",
        f"- Meanwhile a server of revision 0014 wrote in raw SQL (`bench/history_load.py`):"
        f" {load.statements:,} statements, the longest {load.longest_ms:.0f} ms"
        f" (`{load.longest} …`); the longest wait for a lock of one seen in"
        f" `pg_stat_activity` (sampled every {SAMPLE_SECONDS * 1000:.0f} ms):"
        f" {result.longest_lock_wait_ms:.0f} ms; errors {len(load.errors)}.",
    ]


def report(runs: int, command: str) -> list[str]:
    """Measured on a database of its own, dropped after; the line printed; the section."""
    result = measure(runs)
    print(result.line())
    return section(result, machine.describe(), datetime.now(UTC), command)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_RUNS
    append(report(runs, " ".join(["python -m bench.migration_online", *sys.argv[1:]])))


if __name__ == "__main__":
    main()
