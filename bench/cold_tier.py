"""The cold tier's costs: bytes per run in the database (``pg_total_relation_size`` of one
week's runs, attempts and run_events slices, indexes included) against the gzip'd JSON Lines
the export writes, the export's time, and the time to read one tenant's day file back;
with ``lines``, each attempt also prints that many log lines (``bench.log_bytes``' long ones,
one chunk), compacted before the export: the logs' bytes hot and cold, and one cold log's read.

    .venv/bin/python -m bench.cold_tier [runs_per_day] [days] [lines]

One database on ``HERDER_BENCH_POSTGRES_URL`` (default the local server), made and dropped;
the runs of one job, each with one succeeded attempt and its events, on ``days`` days of
one week; then the clock jumps past the hot window and one maintenance pass exports them.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from sqlalchemy import text

from bench.log_bytes import line
from herder.app.claims import claim
from herder.control.dispatcher import Dispatcher
from herder.control.maintenance import Maintenance
from herder.domain.history import slice_of
from herder.domain.jobs import JobSpec, Resources
from herder.domain.models import Assignment
from herder.domain.overrides import RunOverrides, RunRequest
from herder.domain.states import AttemptState
from herder.protocol import Completion, OutputChunk
from herder.store.cold.blobs import DirectoryBlobStore
from herder.store.cold.manifest import Manifest, manifest_key
from herder.store.cold.reads import cold_runs
from herder.store.cold.tier import ColdTier
from herder.store.database import Database
from herder.store.store import Store

SERVER = os.environ.get("HERDER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432")
DATABASE = "herder_bench_cold"
START = datetime(2027, 3, 8, 9, tzinfo=UTC)  # a Monday
BATCH = 1000  # runs submitted, placed and settled at a time
REPEATS = 5


class JumpingClock:
    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def now(self) -> datetime:
        return self.moment


def main(runs_per_day: int, days: int, lines: int = 0) -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{DATABASE}"')
    url = f"{SERVER}/{DATABASE}".replace("postgresql://", "postgresql+psycopg://")
    Database(url).migrate()
    clock, root = JumpingClock(START), Path(tempfile.mkdtemp(prefix="herder-bench-cold-"))
    tier = ColdTier(DirectoryBlobStore(root))
    store = Store(url, clock=clock, cold=tier)
    try:
        maintenance = Maintenance(store.history, partitioned=True)
        maintenance.step()
        tenant_id = _history(store, clock, runs_per_day, days, lines)
        while store.log_compaction.compact_ended().compacted:
            pass
        piece = slice_of(START)
        with store.database.read() as connection:
            runs = connection.execute(
                text(f"SELECT count(*) FROM runs_{piece.suffix}")
            ).scalar_one()
            hot = sum(
                connection.execute(
                    text(f"SELECT pg_total_relation_size('{table}_{piece.suffix}')")
                ).scalar_one()
                for table in ("runs", "attempts", "run_events")
            )
            hot_logs = connection.execute(  # the compacted logs (the chunks' slice is empty)
                text(f"SELECT pg_total_relation_size('attempt_logs_{piece.suffix}')")
            ).scalar_one()
            a_run = connection.execute(
                text(f"SELECT min(id) FROM runs_{piece.suffix}")
            ).scalar_one()
        clock.moment = START + timedelta(days=tier.hot_days + 10)
        began = time.perf_counter()
        maintenance.step()
        exported = time.perf_counter() - began
        manifest = Manifest.from_json((root / manifest_key(piece)).read_bytes())
        cold = sum(file.bytes for file in manifest.files)
        print(f"{runs} runs: hot {hot / runs:.0f} B/run, cold {cold / runs:.0f} B/run "
              f"({hot / cold:.0f}x); export {exported:.1f} s")  # fmt: skip
        if lines:
            cold_logs = sum(file.bytes for file in manifest.logs)
            began = time.perf_counter()
            assert store.logs.read(tenant_id, a_run).chunks
            read = time.perf_counter() - began
            print(f"logs, {lines} lines a run: hot {hot_logs / runs:.0f} B/run (attempt_logs),"
                  f" cold {cold_logs / runs:.0f} B/run ({len(manifest.logs)} files,"
                  f" {cold_logs} B); one cold run's log: {read * 1000:.0f} ms")  # fmt: skip
        file = manifest.files[0]
        day = datetime(file.day.year, file.day.month, file.day.day, tzinfo=UTC)
        timings = []
        for _ in range(REPEATS):
            began = time.perf_counter()
            cold_runs(tier.blobs, tenant_id, day, day, lambda _: True, file.runs)
            timings.append(time.perf_counter() - began)
        print(f"one tenant's day file ({file.runs} runs, {file.bytes} B): "
              f"{statistics.median(timings) * 1000:.0f} ms (median of {REPEATS})")  # fmt: skip
    finally:
        store.close()
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')


def _history(store: Store, clock: JumpingClock, runs_per_day: int, days: int, lines: int) -> str:
    tenant_id = store.access.create_tenant("bench").id
    spec = JobSpec.model_validate({"runtime": "shell", "command": "python3 nightly.py --all"})
    job_id = store.jobs.create(tenant_id, "nightly", spec).id
    token = store.access.authenticate_worker_token(store.access.create_worker_token("w"))
    worker_id = store.workers.register(
        token, name="w", capacity=Resources(cpu=1024, memory_mb=16777216),
        max_slots=BATCH, labels={}, version="bench",
    )[0].id  # fmt: skip
    for _ in range(days):
        for _ in range(runs_per_day // BATCH):
            store.runs.submit_many(tenant_id, [RunRequest(job_id, RunOverrides())] * BATCH)
            Dispatcher(store.placement).step()
            claimed = claim(store, worker_id, BATCH)
            done = [
                Completion(
                    attempt_id=assigned.attempt_id,
                    attempt=assigned.attempt,
                    outcome=AttemptState.SUCCEEDED,
                    exit_code=0,
                    reason="exit 0",
                )
                for assigned in claimed
            ]
            output = [_output(assigned, number, clock.moment, lines)
                      for number, assigned in enumerate(claimed)]  # fmt: skip
            for first in range(0, len(done), 200):
                chunks = [chunk for chunk in output[first : first + 200] if chunk is not None]
                store.attempts.report(worker_id, chunks, [])
                store.attempts.report(worker_id, [], done[first : first + 200])
        clock.moment += timedelta(days=1)
    return tenant_id


def _output(assigned: Assignment, number: int, at: datetime, lines: int) -> OutputChunk | None:
    """What a quick job prints: its lines in one chunk."""
    if not lines:
        return None
    printed = "".join(line(number, n, at, short=False) for n in range(lines))
    return OutputChunk.of(assigned.attempt_id, assigned.attempt, 0, "stdout", printed.encode())


if __name__ == "__main__":
    main(*(int(argument) for argument in sys.argv[1:4]))
