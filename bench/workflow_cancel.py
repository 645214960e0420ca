"""Scenario: cancelling a workflow run of a wide fan-out — ``TASKS`` tasks each mapped over
``ITEMS`` items, all queued (or, with ``--max-queued``, most held past the tenant's bound) — on
each store, through the repository a ``POST /v1/workflow-runs/{id}/cancel`` calls. The cancel
is one decision applied set-based in one unit of work: its time should stay flat per run.

    python -m bench.workflow_cancel [--store sqlite|postgresql|both] [--items 1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.dispatch_store import postgres_database, sqlite_database
from herder.app import workflows
from herder.domain.jobs import JobSpec
from herder.domain.tenants import TenantQuotas
from herder.domain.workflows.spec import WorkflowSpec
from herder.store.store import Store

TASKS = 5
ITEMS = 1000
POSTGRES_DATABASE = os.environ.get("HERDER_BENCH_DATABASE", "herder_bench") + "_cancel"


@dataclass(frozen=True)
class Measured:
    """The runs the start made and how many it queued (the rest held past ``max_queued``);
    the start's and the cancel's wall seconds, and this process's CPU seconds in the cancel
    (SQLite's work is all in it: a loaded box stretches the wall time, not this)."""

    runs: int
    queued: int
    start_seconds: float
    cancel_seconds: float
    cancel_cpu_seconds: float


def measure(url: str, items: int, max_queued: int | None) -> Measured:
    store = Store(url)
    try:
        store.migrate()
        quotas = TenantQuotas(max_queued=max_queued) if max_queued else None
        tenant = store.access.create_tenant("wide", quotas=quotas).id
        store.jobs.create(tenant, "work", JobSpec(runtime="shell", command="true"))
        spec = WorkflowSpec.model_validate(
            {
                "params": {"items": []},
                "tasks": [
                    {"name": f"each{n}", "job": "work", "map_over": "params.items"}
                    for n in range(TASKS)
                ],
            }
        )
        workflow = store.workflows.create(tenant, "wide", spec)
        started = time.perf_counter()
        run, _ = workflows.start(store, tenant, workflow.id, {"items": list(range(items))})
        start_seconds = time.perf_counter() - started
        tasks = store.workflow_runs.get(tenant, run.id).tasks
        queued = sum(task.state == "queued" for task in tasks)
        started, cpu = time.perf_counter(), time.process_time()
        cancelled = workflows.cancel(store, tenant, run.id)
        cancel_seconds, cancel_cpu = time.perf_counter() - started, time.process_time() - cpu
        assert cancelled.state == "cancelled", cancelled
        return Measured(len(tasks), queued, start_seconds, cancel_seconds, cancel_cpu)
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--items", type=int, default=ITEMS, help=f"items each of {TASKS} tasks")
    parser.add_argument("--max-queued", type=int, default=None, help="the tenant's bound")
    args = parser.parse_args()
    stores = ["sqlite", "postgresql"] if args.store == "both" else [args.store]
    for name in stores:
        if name == "sqlite":
            with tempfile.TemporaryDirectory() as home, sqlite_database(Path(home), "c") as url:
                found = measure(url, args.items, args.max_queued)
        else:
            with postgres_database(POSTGRES_DATABASE) as url:
                found = measure(url, args.items, args.max_queued)
        print(
            f"{name}: {found.runs:,} runs, {found.queued:,} queued (max_queued "
            f"{args.max_queued or '-'}): started in {found.start_seconds:.2f} s, cancelled in "
            f"{found.cancel_seconds:.2f} s ({found.cancel_cpu_seconds:.2f} s CPU in this process)"
        )


if __name__ == "__main__":
    main()
