"""History at revision 0014 (plain tables) and a server of that revision writing to it: what
the online conversion of migration 0015 is measured against (``bench.migration_online``)
and tested under (``tests/integration/test_history_conversion_online.py``).

``fill`` makes the runs in SQL (``INSERT … SELECT FROM generate_series``), spread over
``WEEKS`` weeks before now, each with one attempt and two events; every tenth attempt has a
log chunk and every hundredth a compacted log. A third of the runs hold an idempotency key,
a fifth a schedule's fire, a seventh a workflow task's key.

``OldServerLoad`` writes in raw SQL as such a server would, in rounds: a run submitted (with
an idempotency key; every fourth a fire, every fifth a task key) with its attempt, an event
and a log chunk; a run and an attempt moved; a log chunk deleted. Every statement is timed,
and with ``keep_rows`` the rows its writes left (``RETURNING *``) are kept, by table and key,
``None`` for a row deleted.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench.history_fill import BASE32_MS, RANDOM_TAIL
from herder.clock import epoch_ms
from herder.domain.ids import new_id

WEEKS = 26
TENANT = "ten_load"  # as the fill spells it
SAMPLE = 2_000  # the rows there were that the load moves or deletes, drawn at its start
APPLICATION = "herder-old-server"  # the load's connections, as pg_stat_activity names them
# Each history table's key: what ``OldServerLoad.rows`` and a snapshot are keyed by.
KEYS = {
    "runs": "id",
    "attempts": "id",
    "run_events": "id",
    "log_chunks": "id",
    "attempt_logs": "attempt_id",
}

_MADE = f"""
CREATE TEMPORARY TABLE load_made AS
SELECT n, made, 'run_' || bench_base32_ms(ms) || {RANDOM_TAIL} AS run_id,
    'att_' || bench_base32_ms(ms + 1) || {RANDOM_TAIL} AS attempt_id
FROM (
    SELECT n, ms, to_timestamp(ms / 1000.0) AS made
    FROM (SELECT n, %(start_ms)s::bigint + n * %(step_ms)s::bigint AS ms
          FROM generate_series(1, %(runs)s) n) drawn
) timed
"""
_FILL = [
    "INSERT INTO tenants (id, name, weight, is_system, quotas, created_at)"
    f" VALUES ('{TENANT}', 'load', 1, false, '{{}}', now())",
    """INSERT INTO runs (id, tenant_id, job_id, job_name, state, priority, spec, cpu_milli,
        memory_mb, gpus, idempotency_key, schedule_id, scheduled_for, workflow_run_id,
        task_name, map_index, repair, attempt_count, created_at, queued_at, started_at,
        finished_at, exit_code)
    SELECT run_id, 'ten_load', 'job_' || n % 100, 'load', 'succeeded', n % 4,
        '{"runtime": "shell", "command": "true"}', 1000, 256, 0,
        CASE WHEN n % 3 = 0 THEN 'key-' || n END,
        CASE WHEN n % 5 = 0 THEN 'sch_' || n % 50 END, CASE WHEN n % 5 = 0 THEN made END,
        CASE WHEN n % 7 = 0 THEN 'wfr_' || n END, CASE WHEN n % 7 = 0 THEN 'task' END,
        CASE WHEN n % 7 = 0 THEN -1 END, CASE WHEN n % 7 = 0 THEN 0 END,
        1, made, made, made + interval '1 s', made + interval '5 s', 0
    FROM load_made""",
    """INSERT INTO attempts (id, run_id, number, worker_id, state, cpu_milli, memory_mb, gpus,
        exit_code, started_at, finished_at)
    SELECT attempt_id, run_id, 1, 'wrk_' || n % 16, 'succeeded', 1000, 256, 0, 0,
        made + interval '1 s', made + interval '5 s'
    FROM load_made""",
    """INSERT INTO run_events (run_id, at, from_state, to_state, attempt, actor, message)
    SELECT run_id, at, from_state, to_state, 1, 'worker', message FROM load_made,
    LATERAL (VALUES (made + interval '1 s', 'queued', 'running', 'placed'),
                    (made + interval '5 s', 'running', 'succeeded', 'ended')) AS events
        (at, from_state, to_state, message)""",
    """INSERT INTO log_chunks (attempt_id, seq, stream, data, at)
    SELECT attempt_id, 0, 'stdout', convert_to('line ' || n, 'UTF8'), made
    FROM load_made WHERE n % 10 = 0""",
    """INSERT INTO attempt_logs (attempt_id, run_id, sha256, encoding, content_bytes,
        stored_bytes, chunks, compacted_at, data)
    SELECT attempt_id, run_id, md5(attempt_id) || md5(run_id), 'zlib', 12, 12, 1, made,
        convert_to('compacted ' || n, 'UTF8')
    FROM load_made WHERE n % 100 = 0""",
]


def fill(url: str, runs: int, now: datetime) -> float:
    """The runs, attempts, events and logs, analysed; the seconds it took."""
    began = time.monotonic()
    start = now - timedelta(weeks=WEEKS)
    step_ms = (epoch_ms(now) - epoch_ms(start)) // (runs + 1)  # one run a millisecond at most
    with psycopg.connect(url) as connection:
        connection.execute("SET synchronous_commit = off")
        connection.execute(BASE32_MS.replace(" bench_base32_ms", " pg_temp.bench_base32_ms"))
        connection.execute(
            _MADE.replace("bench_base32_ms", "pg_temp.bench_base32_ms"),
            {"start_ms": epoch_ms(start), "step_ms": max(step_ms, 1), "runs": runs},
        )
        for statement in _FILL:
            connection.execute(statement)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")
    return time.monotonic() - began


def snapshot(url: str) -> dict[str, dict[Any, dict[str, Any]]]:
    """Every history table's rows by key; a key seen twice fails."""
    tables: dict[str, dict[Any, dict[str, Any]]] = {}
    with psycopg.connect(url, row_factory=dict_row) as connection:
        for table, key in KEYS.items():
            rows = connection.execute(f"SELECT * FROM {table}").fetchall()
            tables[table] = {row[key]: row for row in rows}
            assert len(tables[table]) == len(rows), f"{table}: a key twice"
    return tables


@dataclass
class LoadReport:
    statements: int = 0
    longest_ms: float = 0.0
    longest: str = ""  # the statement that took longest, its first words
    errors: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"load: {self.statements} statements, longest {self.longest_ms:.0f} ms"
            f" ({self.longest}), errors {len(self.errors)}"
        )


class OldServerLoad:
    """Writes like a server of revision 0014 until stopped (see the module's docstring)."""

    def __init__(self, url: str, *, keep_rows: bool, pause_seconds: float = 0.005) -> None:
        self._url = url
        self._keep_rows = keep_rows
        self._pause = pause_seconds
        self._stop = threading.Event()
        self._random = random.Random(43)
        self.report = LoadReport()
        self.rows: dict[str, dict[Any, dict[str, Any] | None]] = {table: {} for table in KEYS}
        with psycopg.connect(url) as connection:
            self._runs, self._attempts, self._chunks = (
                _ids(connection, f"SELECT id FROM {table} ORDER BY random() LIMIT {SAMPLE}")
                for table in ("runs", "attempts", "log_chunks")
            )
        self._thread = threading.Thread(target=self.write, name="old-server-load", daemon=True)

    def start(self) -> None:
        """Write in a thread of its own until ``stop``."""
        self._thread.start()

    def stop(self) -> LoadReport:
        self._stop.set()
        self._thread.join()
        return self.report

    def write(self, rounds: int | None = None) -> LoadReport:
        """Write ``rounds`` rounds (until stopped: None), a pause before each."""
        with psycopg.connect(
            self._url, autocommit=True, row_factory=dict_row, application_name=APPLICATION
        ) as connection:
            number = 0
            while number != rounds and not self._stop.wait(self._pause):
                number += 1
                for transaction in (self._submit, self._move, self._delete_chunk):
                    written: list[tuple[str, Any, dict[str, Any] | None]] = []
                    try:
                        with connection.transaction():
                            transaction(connection, number, written)
                    except psycopg.Error as error:
                        self.report.errors.append(f"{type(error).__name__}: {error}")
                        continue
                    if self._keep_rows:
                        for table, key, row in written:
                            self.rows[table][key] = row
        return self.report

    def _submit(self, connection: psycopg.Connection[Any], number: int, written: list[Any]) -> None:
        now = datetime.now(UTC)
        run_id, attempt_id = new_id("run", epoch_ms(now)), new_id("att", epoch_ms(now) + 1)
        fire = ("sch_load", now) if number % 4 == 0 else (None, None)
        task = (f"wfr_load_{number}", "task", -1, 0) if number % 5 == 0 else (None,) * 4
        run = self._timed(
            connection, written, "runs",
            "INSERT INTO runs (id, tenant_id, job_id, job_name, state, priority, spec,"
            " cpu_milli, memory_mb, gpus, idempotency_key, schedule_id, scheduled_for,"
            " workflow_run_id, task_name, map_index, repair, attempt_count, created_at,"
            " queued_at) VALUES (%s, %s, 'job_load', 'load', 'running', 1, '{}', 1000, 256, 0,"
            " %s, %s, %s, %s, %s, %s, %s, 1, %s, %s) ON CONFLICT DO NOTHING RETURNING *",
            (run_id, TENANT, f"load-{number}", *fire, *task, now, now),
        )  # fmt: skip
        if run is None:
            return
        self._timed(
            connection, written, "attempts",
            "INSERT INTO attempts (id, run_id, number, worker_id, state, cpu_milli, memory_mb,"
            " gpus, started_at) VALUES (%s, %s, 1, 'wrk_load', 'running', 1000, 256, 0, %s)"
            " RETURNING *",
            (attempt_id, run_id, now),
        )  # fmt: skip
        self._timed(
            connection, written, "run_events",
            "INSERT INTO run_events (run_id, at, from_state, to_state, attempt, actor, message)"
            " VALUES (%s, %s, 'queued', 'running', 1, 'dispatcher', 'placed') RETURNING *",
            (run_id, now),
        )  # fmt: skip
        self._timed(
            connection, written, "log_chunks",
            "INSERT INTO log_chunks (attempt_id, seq, stream, data, at)"
            " VALUES (%s, 0, 'stdout', %s, %s) RETURNING *",
            (attempt_id, f"round {number}".encode(), now),
        )  # fmt: skip
        self._runs.append(run_id)
        self._attempts.append(attempt_id)

    def _move(self, connection: psycopg.Connection[Any], number: int, written: list[Any]) -> None:
        self._timed(
            connection, written, "runs",
            "UPDATE runs SET priority = priority + 1, reason = %s WHERE id = %s RETURNING *",
            (f"moved in round {number}", self._random.choice(self._runs)),
        )  # fmt: skip
        self._timed(
            connection, written, "attempts",
            "UPDATE attempts SET log_bytes = coalesce(log_bytes, 0) + 1, reason = %s"
            " WHERE id = %s RETURNING *",
            (f"moved in round {number}", self._random.choice(self._attempts)),
        )  # fmt: skip

    def _delete_chunk(
        self, connection: psycopg.Connection[Any], number: int, written: list[Any]
    ) -> None:
        if not self._chunks:
            return
        chunk = self._chunks.pop()
        self._timed(
            connection, written, "log_chunks",
            "DELETE FROM log_chunks WHERE id = %s RETURNING *", (chunk,), deletes=True,
        )  # fmt: skip

    def _timed(
        self,
        connection: psycopg.Connection[Any],
        written: list[Any],
        table: str,
        statement: str,
        values: tuple[Any, ...],
        *,
        deletes: bool = False,
    ) -> dict[str, Any] | None:
        began = time.perf_counter()
        row = connection.execute(statement, values).fetchone()
        took_ms = (time.perf_counter() - began) * 1000
        self.report.statements += 1
        if took_ms > self.report.longest_ms:
            self.report.longest_ms, self.report.longest = took_ms, " ".join(statement.split()[:3])
        if row is not None:
            written.append((table, row[KEYS[table]], None if deletes else row))
        return row


def _ids(connection: psycopg.Connection[Any], query: str) -> list[Any]:
    return [row[0] for row in connection.execute(query)]
