"""Idle submit → start through the store, the dispatcher's share of it: one run at a time
submitted in-process to an idle worker, one dispatcher pass, the run reported done by its
worker (whose notice the dispatcher hears). The start is ``started_at - created_at`` as the
one-off scenario measures it through the API, without HTTP and the wake-up between threads.

The dispatcher's clock moves ``GAP_SECONDS`` per run, so most passes are quick ones and a
full pass comes every ``FULL_PASS_SECONDS``, as on a quiet system.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from bench.dispatch_store import postgres_database, sqlite_database
from herder.app.reports import report
from herder.app.submit import submit
from herder.control.dispatcher import Dispatcher
from herder.domain.jobs import JobSpec, Resources
from herder.domain.overrides import RunOverrides
from herder.domain.states import AttemptState
from herder.protocol import Completion
from herder.store.store import Store

RUNS = 200
GAP_SECONDS = 0.01
POSTGRES_DATABASE = "herder_bench_dispatch_idle"


@dataclass(frozen=True)
class IdleResult:
    store: str
    runs: int
    start_ms: list[float]  # started_at - created_at of each run
    pass_ms: list[float]  # the dispatcher pass that placed it

    @staticmethod
    def percentile(values: list[float], fraction: float) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[round(fraction * 100) - 1]


def measure_idle(stores: list[str], home: Path) -> list[IdleResult]:
    results = []
    for store in stores:
        if store == "postgresql":
            with postgres_database(POSTGRES_DATABASE) as url:
                results.append(_measure(store, url))
        else:
            with sqlite_database(home, "dispatch-idle") as url:
                results.append(_measure(store, url))
    return results


def _measure(name: str, url: str) -> IdleResult:
    store = Store(url)
    try:
        store.migrate()
        tenant = store.access.create_tenant("bench")
        job = store.jobs.create(tenant.id, "idle", JobSpec(runtime="shell", command="true"))
        token = store.access.authenticate_worker_token(store.access.create_worker_token("b"))
        worker, _secret = store.workers.register(
            token, name="idle", capacity=Resources(cpu=2, memory_mb=4096), max_slots=4,
            labels={}, version="bench",
        )  # fmt: skip
        clock = [0.0]
        dispatcher = Dispatcher(store.placement, monotonic=lambda: clock[0])
        dispatcher.step()  # the first pass reads the fleet
        starts, passes = [], []
        for _ in range(RUNS):
            clock[0] += GAP_SECONDS
            run, _new = submit(store, tenant.id, job.id, RunOverrides())
            began = time.perf_counter()
            dispatcher.step()
            passes.append((time.perf_counter() - began) * 1000)
            detail = store.runs.detail(tenant.id, run.id)
            assert detail.started_at is not None, "the idle worker should have taken the run"
            starts.append((detail.started_at - detail.created_at).total_seconds() * 1000)
            (attempt,) = detail.attempts
            done = Completion(
                attempt_id=attempt.id, attempt=attempt.number, outcome=AttemptState.SUCCEEDED
            )
            report(store, worker.id, [], [done])
        return IdleResult(name, RUNS, starts, passes)
    finally:
        store.close()
