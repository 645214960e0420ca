"""Scenario: events, triggers and waiting tasks (issue 27).

Through real processes on PostgreSQL (a server with its loops and one worker at isolation
``none``, as the one-off scenario runs them):

1. **Idle latency**: one event at a time, each starting a run of ``true`` through a
   trigger, event accepted → run started (the run's ``started_at`` minus the event's
   ``received_at``, server clocks); in turns with it, one plain submit at a time
   (``created_at`` → ``started_at``).
2. **A burst**: 10,000 events sent at once from 8 client threads, each with its own id,
   then 1,000 of them sent again: every event starts exactly one run, all run, none is
   lost or doubled.
3. **Approvals**: workflow runs whose first task is an approval; approve → its successor
   started (the approval's ``finished_at`` → the successor's ``started_at``).

In-process: **10,000 waiting tasks** beside the dispatch scenario's world (10,000 queued
runs, 500 workers): the dispatcher's steady pass with and without them.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, insert, select

from bench.dispatch import SEED
from bench.dispatch_store import StoreResult, measure_postgres
from bench.dispatch_workload import make_world
from bench.oneoff import JOB, Herder, _percentile, _wait_all_ended
from herder.clock import epoch_ms
from herder.credentials import ClientCredentials
from herder.domain.ids import new_id
from herder.domain.lifecycle.changes import Event, NewRun
from herder.domain.states import RunState
from herder.domain.workflows.task_runs import WAITING_SPEC
from herder.store.database import Database
from herder.store.runs.writes import new_run_row
from herder.store.schema import events, runs
from herder.store.store import Store
from herder.worker.isolation import Isolation

IDLE = 100
BURST = 10_000
RESENT = 1_000
THREADS = 8
APPROVALS = 20
WAITING = 10_000


@dataclass(frozen=True)
class EventsResult:
    event_start_p50_ms: float
    event_start_p99_ms: float
    submit_start_p50_ms: float
    submit_start_p99_ms: float
    burst_events: int
    burst_seconds: float  # first accepted → last run ended
    burst_runs: int
    burst_distinct_runs: int
    resent_duplicates: int  # of the resent, answered as duplicates
    approval_p50_ms: float
    approval_p99_ms: float


@dataclass(frozen=True)
class WaitingCost:
    plain: StoreResult
    waiting: StoreResult


def measure(database_url: str, home: Path) -> EventsResult:
    database = Database(database_url)
    with Herder(home, database_url, Isolation.NONE) as herder, herder.client() as client:
        job = client.create_job("build", JOB)
        client.wait(client.start_run(job.id).id, timeout=30)  # warm: the worker registered
        credentials = ClientCredentials.load(home)
        assert credentials is not None
        key = {"Authorization": f"Bearer {credentials.api_key}"}
        with httpx.Client(base_url=herder.url, headers=key, timeout=30) as http:
            made = http.post(
                "/v1/triggers", json={"name": "on-push", "event": "push", "job": "build"}
            )
            made.raise_for_status()
            event_starts, submit_starts = [], []
            for _ in range(IDLE):  # taken in turns: a slower minute of the box slows both
                event_starts.append(_event_start(http, database))
                submitted = http.post(f"/v1/jobs/{job.id}/runs", json={})
                submitted.raise_for_status()
                created = datetime.fromisoformat(submitted.json()["created_at"])
                submit_starts.append(_started_ms(database, submitted.json()["id"], created))
            approvals = _approvals(http, client)
        with database.read() as connection:
            before = connection.execute(select(func.count()).select_from(runs)).scalar_one()
        started = time.monotonic()
        _burst(herder.url, key, range(BURST))
        resent = _burst(herder.url, key, range(RESENT))
        with database.engine.connect() as poll:
            _wait_all_ended(poll, before + BURST, timeout=900)
        burst_seconds = time.monotonic() - started
        with database.read() as connection:
            outcomes = (
                connection.execute(
                    select(events.c.outcomes).where(events.c.sender_id.like("burst-%"))
                )
                .scalars()
                .all()
            )
            total = connection.execute(select(func.count()).select_from(runs)).scalar_one()
    database.dispose()
    run_ids = [outcome["run_id"] for listed in outcomes for outcome in listed]
    return EventsResult(
        event_start_p50_ms=statistics.median(event_starts),
        event_start_p99_ms=_percentile(event_starts, 0.99),
        submit_start_p50_ms=statistics.median(submit_starts),
        submit_start_p99_ms=_percentile(submit_starts, 0.99),
        burst_events=len(outcomes),
        burst_seconds=burst_seconds,
        burst_runs=total - before,
        burst_distinct_runs=len(set(run_ids)),
        resent_duplicates=sum(1 for status in resent if status == 200),
        approval_p50_ms=statistics.median(approvals),
        approval_p99_ms=_percentile(approvals, 0.99),
    )


def _event_start(http: httpx.Client, database: Database) -> float:
    """One event, then its run's start: milliseconds from the event's acceptance."""
    sent = http.post("/v1/events", json={"name": "push", "payload": {"ref": "main"}})
    sent.raise_for_status()
    event = sent.json()["event"]
    run_id = event["outcomes"][0]["run_id"]
    return _started_ms(database, run_id, datetime.fromisoformat(event["received_at"]))


def _started_ms(database: Database, run_id: str, since: datetime) -> float:
    """Milliseconds from ``since`` to the run's start, read as it happens."""
    while True:
        with database.read() as connection:
            started = connection.execute(
                select(runs.c.started_at).where(runs.c.id == run_id)
            ).scalar()
        if started is not None:
            return float((started - since).total_seconds() * 1000)
        time.sleep(0.002)


def _burst(url: str, key: dict[str, str], numbers: range) -> list[int]:
    """Events ``burst-N`` for each number, from ``THREADS`` clients at once; the statuses."""

    def send(chunk: list[int]) -> list[int]:
        with httpx.Client(base_url=url, headers=key, timeout=60) as http:
            return [
                http.post(
                    "/v1/events", json={"name": "push", "id": f"burst-{n}", "payload": {"n": n}}
                ).status_code
                for n in chunk
            ]

    chunks = [list(numbers[start::THREADS]) for start in range(THREADS)]
    with ThreadPoolExecutor(THREADS) as pool:
        statuses = [status for part in pool.map(send, chunks) for status in part]
    assert all(status in (200, 201) for status in statuses), set(statuses)
    return statuses


def _approvals(http: httpx.Client, client: Any) -> list[float]:
    """Approve → successor started, milliseconds, for ``APPROVALS`` workflow runs."""
    tasks = [
        {"name": "review", "approval": {}},
        {"name": "ship", "job": "build", "depends_on": ["review"]},
    ]
    flow = http.post("/v1/workflows", json={"name": "release", "tasks": tasks})
    flow.raise_for_status()
    took = []
    for _ in range(APPROVALS):
        run = http.post(f"/v1/workflows/{flow.json()['id']}/runs", json={})
        run.raise_for_status()
        decided = http.post(f"/v1/workflow-runs/{run.json()['id']}/tasks/review/approve", json={})
        decided.raise_for_status()
        by_task = {task["task"]: task for task in decided.json()["tasks"]}
        approved_at = datetime.fromisoformat(by_task["review"]["finished_at"])
        ship = client.wait(by_task["ship"]["run_id"], timeout=30, poll=0.005)
        took.append((ship.started_at - approved_at).total_seconds() * 1000)
    return took


def _waiting_tasks(store: Store) -> None:
    """``WAITING`` runs of approval tasks, as a workflow makes them: they hold nothing."""
    tenant = store.access.create_tenant("waiters").id
    now = datetime.now(UTC)
    rows = []
    for _ in range(WAITING):
        run_id = new_id("run", epoch_ms(now))
        new = NewRun(run_id, tenant, "", ":approval", WAITING_SPEC,
                     Event(run_id, "waiting", "bench"), state=RunState.WAITING)  # fmt: skip
        rows.append(new_run_row(new, now))
    with store.database.write() as connection:
        for start in range(0, len(rows), 2_000):
            connection.execute(insert(runs), rows[start : start + 2_000])


def waiting_cost() -> WaitingCost:
    world = make_world(SEED, (0.0, 0.0))
    return WaitingCost(measure_postgres(world), measure_postgres(world, _waiting_tasks))
