"""History at scale on PostgreSQL: with millions of ended runs in weekly slices, how fast a
job's (a tenant's, a state's) last 100 runs list, what a retention pass costs, and the hot
bytes a run keeps.

    .venv/bin/python -m bench.history_scale [--runs 10000000]

(``BENCH_HISTORY_RUNS`` sets the default; ``make bench`` runs it as
``python -m bench.run --scenario history``.) The listings go through the store's own
``RunRepository.list``, what ``GET /v1/runs?job_id=…&limit=100`` calls: "cold" is each
sampled job's first read (its pages mostly outside PostgreSQL's buffers; the kernel's page
cache is not dropped on this shared box), "warm" the same reads again.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial

import psycopg
from alembic import command

from bench import history_fill
from herder.clock import epoch_ms
from herder.domain.ids import id_bound, new_id
from herder.domain.models import Page, Run
from herder.domain.states import RunState
from herder.store.history.listing import WINDOWS
from herder.store.history.partitions import HISTORY_TABLES, attached_slices, create_slice
from herder.store.history.retention import HistoryRetention, visible_runs_floor
from herder.store.migrations import alembic_config
from herder.store.store import Store

DEFAULT_RUNS = int(os.environ.get("BENCH_HISTORY_RUNS", "10000000"))
SAMPLES = 200  # jobs (and tenants, states) read, each cold then warm
LIMIT = 100
HOT_TABLES = ("runs", "attempts", "run_events", "log_chunks", "attempt_logs")
INSERT_PAUSE_SECONDS = 0.005  # between the concurrent inserts during a retention pass


@dataclass(frozen=True)
class Latency:
    label: str
    cold_p50_ms: float
    cold_p99_ms: float
    warm_p50_ms: float
    warm_p99_ms: float


@dataclass(frozen=True)
class Retention:
    slice_runs: int
    detach_seconds: float
    drop_seconds: float
    insert_p50_ms: float  # a concurrent insert into the current slice, outside the pass
    insert_max_ms: float  # the slowest one while the pass ran


@dataclass
class HistoryResult:
    runs: int
    fill_seconds: float
    latencies: list[Latency]
    plan: str
    hot_bytes: dict[str, tuple[int, int]]  # table → (table and TOAST, indexes)
    retention: Retention
    # written by the cold tier's measure when it has one; "—" in the report until then
    cold_bytes_per_run: float | None = field(default=None)

    @property
    def hot_bytes_per_run(self) -> float:
        return sum(data + index for data, index in self.hot_bytes.values()) / self.runs


class _At:
    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def now(self) -> datetime:
        return self.moment


def measure(url: str, total_runs: int) -> HistoryResult:
    """Fill ``url`` (a fresh, empty database) and measure it."""
    now = datetime.now(UTC)
    store = Store(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        command.upgrade(alembic_config(store.database), "head")
        with store.database.write() as connection:
            for table in HISTORY_TABLES:
                have = attached_slices(connection, table)
                for piece in history_fill.history_slices(now):
                    if piece not in have:
                        create_slice(connection, table, piece)
        store.history.prepare_slices()
        print(f"filling {total_runs:,} runs over {history_fill.WEEKS} weekly slices", flush=True)
        fill_seconds = history_fill.fill(url, total_runs, now)
        print(f"filled in {fill_seconds:.0f} s", flush=True)
        latencies = _listings(store)
        plan = _plan(url, store)
        hot_bytes = _hot_bytes(url)
        retention = _retention_pass(url, store, now)
    finally:
        store.database.dispose()
    return HistoryResult(total_runs, fill_seconds, latencies, plan, hot_bytes, retention)


def _listings(store: Store) -> list[Latency]:
    rng = random.Random(14)
    jobs = rng.sample(range(history_fill.JOBS), SAMPLES)
    tenants = [rng.randrange(history_fill.TENANTS) for _ in range(SAMPLES)]
    listing = store.runs.list
    cases: dict[str, list[Callable[[], Page[Run]]]] = {
        "a job's last 100": [
            partial(listing, _tenant(job % history_fill.TENANTS), job_id=_job(job), limit=LIMIT)
            for job in jobs
        ],
        "a tenant's last 100": [partial(listing, _tenant(one), limit=LIMIT) for one in tenants],
        "a tenant's last 100 failed": [
            partial(listing, _tenant(one), states=[RunState.FAILED], limit=LIMIT) for one in tenants
        ],
    }
    latencies = []
    for label, reads in cases.items():
        cold, warm = _timed(reads), _timed(reads)
        latency = Latency(label, *_p50_p99(cold), *_p50_p99(warm))
        latencies.append(latency)
        print(f"  {label}: cold p50 {latency.cold_p50_ms:.1f} ms, p99 {latency.cold_p99_ms:.1f};"
              f" warm p50 {latency.warm_p50_ms:.1f} ms, p99 {latency.warm_p99_ms:.1f}",
              flush=True)  # fmt: skip
    return latencies


def _timed(reads: list[Callable[[], Page[Run]]]) -> list[float]:
    times = []
    for read in reads:
        began = time.perf_counter()
        page = read()
        times.append((time.perf_counter() - began) * 1000)
        assert page.items, "a listing came back empty"
    return times


def _p50_p99(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _tenant(number: int) -> str:
    return f"ten_{number:026d}"


def _job(number: int) -> str:
    return f"job_{number:026d}"


def _plan(url: str, store: Store) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of the job listing's first read (its newest window)."""
    now = store.clock.now()
    with store.database.read() as connection:
        floor = visible_runs_floor(connection, _tenant(7), now)
    lower = max(floor, id_bound("run", epoch_ms(now - WINDOWS[0])))
    statement = (
        "EXPLAIN (ANALYZE, BUFFERS) SELECT id, job_id, job_name, state, spec, created_at,"
        " finished_at FROM runs WHERE tenant_id = %s AND job_id = %s AND id >= %s"
        " ORDER BY id DESC LIMIT 101"
    )
    with psycopg.connect(url) as connection:
        rows = connection.execute(statement, (_tenant(7), _job(107), lower)).fetchall()
    return "\n".join(row[0] for row in rows)


def _hot_bytes(url: str) -> dict[str, tuple[int, int]]:
    sizes = {}
    with psycopg.connect(url) as connection:
        for table in HOT_TABLES:
            row = connection.execute(
                "SELECT coalesce(sum(pg_table_size(relid)), 0),"
                " coalesce(sum(pg_indexes_size(relid)), 0)"
                " FROM pg_partition_tree(%s) WHERE isleaf",
                (table,),
            ).fetchone()
            assert row is not None
            sizes[table] = (int(row[0]), int(row[1]))
    return sizes


def _retention_pass(url: str, store: Store, now: datetime) -> Retention:
    """Detach then drop the oldest slice (every history table's), as the maintenance does
    once it is past the longest retention, while another connection inserts runs."""
    oldest = history_fill.history_slices(now)[0]
    with psycopg.connect(url) as connection:
        counted = connection.execute(f'SELECT count(*) FROM "runs_{oldest.suffix}"').fetchone()
    retention = HistoryRetention(store.database, _At(oldest.end + timedelta(days=1825)))
    inserts = _Inserts(url)
    inserts.start()
    time.sleep(1.0)
    began = time.monotonic()
    detached = retention.detach_expired()
    detached_at = time.monotonic()
    dropped = retention.drop_detached()
    ended = time.monotonic()
    time.sleep(1.0)
    inserts.stop()
    print(f"  retention: detached {detached}, dropped {len(dropped)} tables", flush=True)
    outside = [took for at, took in inserts.times if at + took < began or at > ended]
    during = [took for at, took in inserts.times if at < ended and at + took > began]
    return Retention(
        slice_runs=int(counted[0]) if counted else 0,
        detach_seconds=detached_at - began,
        drop_seconds=ended - detached_at,
        insert_p50_ms=statistics.median(outside) * 1000,
        insert_max_ms=max(during, default=0.0) * 1000,
    )


class _Inserts(threading.Thread):
    """Inserts a run into the current slice every few ms, timing each (its own transaction)."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.spec = history_fill.realistic_specs()[0]
        self.times: list[tuple[float, float]] = []  # (monotonic start, seconds)
        self._stopping = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as connection:
            while not self._stopping.is_set():
                run_id = new_id("run", epoch_ms(datetime.now(UTC)))
                began = time.monotonic()
                connection.execute(
                    "INSERT INTO runs (id, tenant_id, job_id, job_name, state, priority, spec,"
                    " cpu_milli, memory_mb, gpus, created_at, queued_at) VALUES (%s, %s, %s,"
                    " 'bench', 'queued', 1, %s, 1000, 512, 0, now(), now())",
                    (run_id, _tenant(0), _job(0), self.spec),
                )
                self.times.append((began, time.monotonic() - began))
                self._stopping.wait(INSERT_PAUSE_SECONDS)

    def stop(self) -> None:
        self._stopping.set()
        self.join()


def section(result: HistoryResult, machine: str, now: datetime, command: str) -> list[str]:
    hot = result.hot_bytes
    cold = "—" if result.cold_bytes_per_run is None else f"{result.cold_bytes_per_run:,.0f} B"
    retention = result.retention
    lines = [
        f"\n### History at scale, {now:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `{command}`.\n",
        f"{result.runs:,} ended runs (one attempt and three events each) over"
        f" {history_fill.WEEKS} weekly slices, {history_fill.TENANTS} tenants,"
        f" {history_fill.JOBS:,} jobs; made in SQL in {result.fill_seconds:.0f} s"
        f" ({result.runs / result.fill_seconds:,.0f} runs/s, with `ANALYZE`).\n",
        "| listing (`RunRepository.list`, limit 100) | cold p50 | cold p99 | warm p50 | warm p99 |",
        "|---|---|---|---|---|",
        *(
            f"| {one.label} | {one.cold_p50_ms:.1f} ms | {one.cold_p99_ms:.1f} ms"
            f" | **{one.warm_p50_ms:.1f} ms** | {one.warm_p99_ms:.1f} ms |"
            for one in result.latencies
        ),
        f"\n{SAMPLES} random jobs / tenants, each read once (cold: its first read since the"
        " fill, the kernel's page cache not dropped) then again (warm); target for a job's"
        " last 100: ≤ 20 ms.\n",
        "| table | data | indexes | bytes per run |",
        "|---|---|---|---|",
        *(
            f"| {table} | {data / 2**20:,.0f} MiB | {index / 2**20:,.0f} MiB"
            f" | {(data + index) / result.runs:,.0f} B |"
            for table, (data, index) in hot.items()
        ),
        f"| **hot, all** | | | **{result.hot_bytes_per_run:,.0f} B** (cold: {cold}) |",
        "\nNo logs were written (log_chunks and attempt_logs stay empty); `bench.log_bytes`"
        " measures a compacted log's bytes per run.\n",
        f"Retention pass on the oldest slice ({retention.slice_runs:,} runs, with their"
        f" attempts and events): detach {retention.detach_seconds * 1000:.0f} ms, drop"
        f" {retention.drop_seconds * 1000:.0f} ms (every history table). A concurrent insert"
        f" into the current slice: p50 {retention.insert_p50_ms:.1f} ms outside the pass,"
        f" slowest {retention.insert_max_ms:.1f} ms during it.",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    parser.add_argument("--database", default="herder_bench_history")
    options = parser.parse_args()
    server = "postgresql://127.0.0.1:5432"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{options.database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{options.database}"')
    try:
        result = measure(f"{server}/{options.database}", options.runs)
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{options.database}" WITH (FORCE)')
    print(result.plan)
    print("\n".join(section(result, "this machine", datetime.now(UTC), "bench.history_scale")))


if __name__ == "__main__":
    main()
