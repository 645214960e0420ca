"""Hot bytes per run of a typical small log, before and after compaction, on PostgreSQL.

``RUNS`` ended runs, each one attempt whose output came in through the store's own write path
(``append_output``), as one chunk (a quick job: the worker sends what it printed every
0.1 s) or a chunk per line (a slow one). The bytes are ``pg_total_relation_size`` of
``log_chunks`` and ``attempt_logs`` (table, TOAST and indexes): before, then after the
compactor's passes and a ``VACUUM FULL`` (in steady state autovacuum makes the deleted chunks'
room reusable by new ones instead).

    .venv/bin/python -m bench.log_bytes [--runs 2000] [--lines 20] [--short-lines]

2026-11-24 21:50-22:00 UTC, this 2-core box, PostgreSQL, 2,000 runs of 20 lines each:

    lines of ~120 characters (2.4 KB), one chunk   745 B/run before, 664 after
        (PostgreSQL's own pglz already shrinks a value past 2 KB; the blob is 473 B of zlib)
    the same, a chunk per line                     5,661 B/run before, 762 after
    lines of ~20 characters (0.4 KB), one chunk    700 B/run before, 471 after
    the same, a chunk per line                     3,973 B/run before, 537 after
    compaction: 2,400 to 9,000 attempts/s in batches of 200 (one core)
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta

import psycopg
from sqlalchemy import insert, text

from herder.clock import epoch_ms
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec, Runtime
from herder.domain.lifecycle.changes import Event, NewRun
from herder.domain.states import AttemptState, RunState
from herder.protocol import OutputChunk
from herder.store.logs import MAX_LOG_BYTES_PER_ATTEMPT, append_output
from herder.store.runs.writes import new_run_row
from herder.store.schema import attempts, runs
from herder.store.store import Store

SERVER = "postgresql://127.0.0.1:5432"
DATABASE = "herder_bench_logs"
TABLES = ("log_chunks", "attempt_logs")
EMPTY_TABLE_BYTES = 3 * 8192  # an empty table's indexes keep a page each
VACUUM_PATIENCE_SECONDS = 120.0
MODULES = ("etl.extract", "etl.transform", "etl.load", "db.pool", "http.client")


def line(run: int, number: int, at: datetime, *, short: bool) -> str:
    module = MODULES[(run + number) % len(MODULES)]
    rows = (run * 7919 + number * 104729) % 100_000
    if short:
        return f"{module}: {rows} rows\n"
    return (
        f"{at.isoformat(timespec='milliseconds')} INFO [{module}] pid=4242 "
        f"fetched {rows} rows from table orders in {rows % 997} ms\n"
    )


def fresh_store() -> Store:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{DATABASE}"')
    store = Store(f"{SERVER}/{DATABASE}")
    store.migrate()
    return store


def ended_runs(store: Store, count: int, lines: int, chunk_per_line: bool, short: bool) -> None:
    tenant = store.access.create_tenant("bench")
    spec = JobSpec(runtime=Runtime.SHELL, command="./etl.sh")
    start = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)
    with store.database.write() as connection:
        for run in range(count):
            at = start + timedelta(seconds=run)
            new = NewRun(new_id("run", epoch_ms(at)), tenant.id, "job_bench", "etl", spec,
                         Event("", "submitted", "bench"))  # fmt: skip
            row = new_run_row(new, at) | {"state": RunState.SUCCEEDED, "attempt_count": 1}
            connection.execute(insert(runs).values(row))
            attempt_id = new_id("att", epoch_ms(at))
            connection.execute(
                insert(attempts).values(
                    id=attempt_id, run_id=new.id, number=1, worker_id="wrk_bench",
                    state=AttemptState.SUCCEEDED, cpu_milli=1000, memory_mb=256, gpus=0,
                    started_at=at, finished_at=at + timedelta(seconds=2),
                )
            )  # fmt: skip
            text_lines = [
                line(run, n, at + timedelta(milliseconds=50 * n), short=short) for n in range(lines)
            ]
            pieces = text_lines if chunk_per_line else ["".join(text_lines)]
            chunks = [
                OutputChunk.of(attempt_id, 1, seq, "stdout", piece.encode())
                for seq, piece in enumerate(pieces)
            ]
            append_output(store.database, connection, attempt_id, chunks, at,
                          MAX_LOG_BYTES_PER_ATTEMPT)  # fmt: skip


def sizes(store: Store) -> dict[str, int]:
    with store.database.read() as connection:
        return {
            table: int(
                connection.execute(
                    text("SELECT pg_total_relation_size(CAST(:table AS regclass))"),
                    {"table": table},
                ).scalar_one()
            )
            for table in TABLES
        }


def vacuum_full(store: Store) -> None:
    """Until the deleted chunks are gone from the file: an old snapshot elsewhere on the
    server (another database's long COPY, say) keeps them a while."""
    deadline = time.monotonic() + VACUUM_PATIENCE_SECONDS
    engine = store.database.engine.execution_options(isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        while True:
            for table in TABLES:
                connection.execute(text(f"VACUUM FULL {table}"))
            empty = connection.execute(text("SELECT NOT EXISTS (SELECT FROM log_chunks)"))
            if not empty.scalar_one() or sizes(store)["log_chunks"] <= EMPTY_TABLE_BYTES:
                return
            if time.monotonic() > deadline:
                print(f"  (log_chunks is empty but still {sizes(store)['log_chunks']:,} B)")
                return
            time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--lines", type=int, default=20)
    parser.add_argument("--short-lines", action="store_true", help="~20 characters, no time")
    options = parser.parse_args()
    for chunk_per_line in (False, True):
        store = fresh_store()
        ended_runs(store, options.runs, options.lines, chunk_per_line, options.short_lines)
        vacuum_full(store)
        before = sizes(store)
        started = time.perf_counter()
        passes = 0
        while store.log_compaction.compact_ended().compacted:
            passes += 1
        seconds = time.perf_counter() - started
        vacuum_full(store)
        after = sizes(store)
        shape = "a chunk per line" if chunk_per_line else "one chunk"
        size = "short " if options.short_lines else ""
        print(f"{options.runs} runs, {options.lines} {size}lines each, {shape}:")
        for label, measured in (("before", before), ("after", after)):
            per_run = sum(measured.values()) / options.runs
            detail = ", ".join(f"{table} {size:,} B" for table, size in measured.items())
            print(f"  {label:6}: {per_run:7.0f} B/run  ({detail})")
        print(f"  compacted in {passes} passes, {seconds:.2f} s "
              f"({options.runs / seconds:,.0f} attempts/s)")  # fmt: skip
        store.close()


if __name__ == "__main__":
    main()
