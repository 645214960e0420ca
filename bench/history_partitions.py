"""The hot path's statements on history partitioned by week against the same rows in plain
tables: planning and execution time (EXPLAIN ANALYZE, median of repeats) of the dispatcher's
queue window, the claim's ``ORDER BY priority DESC, queued_at`` head, a worker's claim read,
settling an attempt by its id, and a run's guarded move.

    .venv/bin/python -m bench.history_partitions [weeks] [runs_per_week]

Two databases on ``HERDER_BENCH_POSTGRES_URL`` (default the local server): one migrated to
0010 (plain tables), one to the head (sliced), each with ``weeks`` weeks of ended runs (one
attempt and two events each) and, in the current week, 2,000 queued and 200 running runs.
"""

from __future__ import annotations

import io
import json
import os
import random
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import psycopg
from alembic import command

from herder.clock import epoch_ms
from herder.domain.history import slice_of, slices_between
from herder.domain.ids import id_bound, new_id
from herder.store.database import Database
from herder.store.history.live import CLOCK_LAG_ALLOWANCE
from herder.store.history.partitions import HISTORY_TABLES, attached_slices, create_slice
from herder.store.migrations import alembic_config

SERVER = os.environ.get("HERDER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432")
NOW = datetime.now(UTC)
REPEATS = 15
TENANT = "ten_bench"
WORKERS = [f"wrk_{index:04d}" for index in range(10)]

STATEMENTS = {
    "queue window (dispatcher)": (
        "SELECT id FROM (SELECT id, priority, queued_at, row_number() OVER (PARTITION BY"
        " tenant_id ORDER BY priority DESC, queued_at) AS position FROM runs"
        " WHERE state = 'queued' AND id >= '{floor}') ranked WHERE position <= 256"
        " ORDER BY priority DESC, queued_at LIMIT 1024"
    ),
    "claim order head": (
        "SELECT id FROM runs WHERE state = 'queued' AND id >= '{floor}'"
        " ORDER BY priority DESC, queued_at LIMIT 64"
    ),
    "worker claim read": (
        "SELECT attempts.id, runs.spec FROM attempts JOIN runs ON runs.id = attempts.run_id"
        " WHERE attempts.worker_id = '{worker}' AND attempts.state = 'running'"
        " AND attempts.delivered_at IS NULL AND attempts.run_id >= '{floor}'"
        " AND runs.id >= '{floor}' ORDER BY attempts.id LIMIT 10"
    ),
    "settle read (attempt)": (
        "SELECT run_id FROM attempts WHERE id = '{attempt}' AND run_id >= '{floor}'"
    ),
    "reaper overdue attempts": (
        "SELECT id FROM attempts WHERE state = 'running' AND deadline_at < now()"
        " AND run_id >= '{floor}' LIMIT 500"
    ),
    "settle by attempt id": (
        "UPDATE attempts SET state = 'succeeded' WHERE id = '{attempt}'"
        " AND state = 'running' AND run_id >= '{floor}' RETURNING id"
    ),
    "guarded run move": (
        "UPDATE runs SET state = 'succeeded' WHERE id = '{run}' AND state = 'running'"
        " AND attempt_count = 1 RETURNING id"
    ),
}


def main(weeks: int = 26, per_week: int = 10_000) -> None:
    rows = _rows(weeks, per_week)
    floor = id_bound("run", epoch_ms(slice_of(NOW - CLOCK_LAG_ALLOWANCE).start))
    for name, revision in (("herder_bench_flat", "0010"), ("herder_bench_sliced", "head")):
        with _database(name, revision, weeks) as url:
            _fill(url, rows)
            # the plain tables as before (no floor); the slices without and with the floor
            floors = {"no live floor": ""}
            if revision == "head":
                floors["live floor"] = floor
            for label, value in floors.items():
                print(f"{name}, {label} ({_partitions(url)} partitions of runs)")
                for statement, template in STATEMENTS.items():
                    sql = template.format(**rows["sample"], floor=value)
                    planning, execution = _measure(url, sql)
                    print(f"  {statement:26} planning {planning:6.3f} ms  execution"
                          f" {execution:6.3f} ms")  # fmt: skip


@contextmanager
def _database(name: str, revision: str, weeks: int) -> Iterator[str]:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{SERVER}/{name}"
    database = Database(url.replace("postgresql://", "postgresql+psycopg://"))
    command.upgrade(alembic_config(database), revision)
    if revision == "head":  # the past weeks' slices, as the loop made them at their time
        with database.write() as connection:
            for table in HISTORY_TABLES:
                have = attached_slices(connection, table)
                for piece in slices_between(NOW - timedelta(weeks=weeks), NOW):
                    if piece not in have:
                        create_slice(connection, table, piece)
    database.dispose()
    yield url


def _rows(weeks: int, per_week: int) -> dict:  # type: ignore[type-arg]
    spec = json.dumps({"runtime": "shell", "command": "true"})
    runs, attempts, events = [], [], []
    rng = random.Random(1)

    def add(made: datetime, state: str, attempt_state: str | None) -> None:
        ms = int(made.timestamp() * 1000)
        run_id = new_id("run", ms)
        queued = made.isoformat()
        ended = None if state in {"queued", "running"} else queued
        count = 0 if attempt_state is None else 1
        runs.append((run_id, TENANT, "job_bench", "bench", state, rng.randint(0, 3), spec,
                     1000, 256, 0, count, made.isoformat(), queued, ended))  # fmt: skip
        if attempt_state is not None:
            attempt_id = new_id("att", ms + 1)
            attempts.append((attempt_id, run_id, 1, rng.choice(WORKERS), attempt_state,
                             1000, 256, 0, queued, ended))  # fmt: skip
        for _ in range(2):
            events.append((run_id, queued, "a", "b", "bench", "x"))

    for week in range(weeks, 0, -1):
        start = NOW - timedelta(weeks=week)
        for index in range(per_week):
            add(start + timedelta(seconds=index * 604800 / per_week), "succeeded", "succeeded")
    for index in range(2000):
        add(NOW - timedelta(seconds=index), "queued", None)
    for index in range(200):
        add(NOW - timedelta(seconds=index), "running", "running")
    running_attempt = attempts[-1]
    sample = {"worker": running_attempt[3], "attempt": running_attempt[0],
              "run": running_attempt[1]}  # fmt: skip
    return {"runs": runs, "attempts": attempts, "events": events, "sample": sample}


def _fill(url: str, rows: dict) -> None:  # type: ignore[type-arg]
    with psycopg.connect(url) as connection:
        connection.execute(
            "INSERT INTO tenants (id, name, weight, is_system, quotas, created_at)"
            " VALUES (%s, 'bench', 1, false, '{}', now())",
            (TENANT,),
        )
        _copy(connection, "runs", "id, tenant_id, job_id, job_name, state, priority, spec,"
              " cpu_milli, memory_mb, gpus, attempt_count, created_at, queued_at, finished_at",
              rows["runs"])  # fmt: skip
        _copy(connection, "attempts", "id, run_id, number, worker_id, state, cpu_milli,"
              " memory_mb, gpus, started_at, finished_at", rows["attempts"])  # fmt: skip
        _copy(connection, "run_events", "run_id, at, from_state, to_state, actor, message",
              rows["events"])  # fmt: skip
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")


def _copy(connection: psycopg.Connection, table: str, columns: str, rows: list) -> None:  # type: ignore[type-arg]
    buffer = io.StringIO()
    for row in rows:
        buffer.write("\t".join("\\N" if value is None else str(value) for value in row) + "\n")
    with connection.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        copy.write(buffer.getvalue())


def _measure(url: str, statement: str) -> tuple[float, float]:
    planning, execution = [], []
    with psycopg.connect(url) as connection:
        for _ in range(REPEATS):
            (plan,) = connection.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}").fetchone()  # type: ignore[misc]
            planning.append(plan[0]["Planning Time"])
            execution.append(plan[0]["Execution Time"])
            connection.rollback()
    return statistics.median(planning), statistics.median(execution)


def _partitions(url: str) -> int:
    with psycopg.connect(url) as connection:
        found = connection.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'runs'::regclass"
        ).fetchone()
    return int(found[0]) if found else 0


if __name__ == "__main__":
    main(*(int(argument) for argument in sys.argv[1:3]))
