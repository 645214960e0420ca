"""Scenario: workflows — how soon a task's successors run, on a real server and worker.

A workflow task's successors are queued in the transaction that ends it, so a chain's cost
per link is what the rest of the path adds: the dispatcher placing the queued run, the worker
hearing of it, starting the job and reporting its end. Measured, on one ``herder server
--with-scheduler`` and one worker (as ``bench/oneoff.py`` sets them up):

- a chain of ``CHAIN_LENGTH`` tasks of ``true``, and of ``sleep 0.01`` (the published
  comparison's 10 ms tasks), ``CHAIN_REPEATS`` times each: the workflow run's ``created_at`` to
  its ``finished_at`` (server clock), and the POST to the moment the client polling ``GET
  /v1/workflow-runs/{id}`` sees it ended (client clock);
- successor start latency: a task run's ``started_at`` (placed on the worker) minus its
  parent's ``finished_at``, over every link of the chains, and where a link's time goes, from
  the runs' and attempts' rows (queued, placed, delivered by a claim, finished);
- a fan-out of ``FAN_OUT`` instances (``map_over: params.items``) joined by one
  ``all_success`` task: from the workflow run's start to the join's start and to its end.
"""

from __future__ import annotations

import itertools
import statistics
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bench.oneoff import JOB, Herder
from herder.client import HerderClient
from herder.domain.workflows.models import WorkflowRunDetail
from herder.store.database import Database
from herder.store.schema import attempts, runs
from herder.worker.isolation import Isolation

CHAIN_LENGTH = 40
CHAIN_REPEATS = 5
FAN_OUT = 1000
CHAIN_POLL_SECONDS = 0.025  # the client's view of the end; the server's clock is the measure
FAN_OUT_POLL_SECONDS = 0.2  # its detail lists 1,001 tasks: read rarely
STATEMENTS_POLL_SECONDS = 0.5  # the chain whose statements are counted: few polls to take off
TIMEOUT_SECONDS = 120
COMMANDS = {"true": "true", "sleep": "sleep 0.01"}
# A chain runs one task at a time: each may have a core. A sandboxed attempt's CPU request is
# its cgroup quota, and the fan-out's 0.01 cpu (1 ms a 100 ms period) throttles even `sleep
# 0.01` to ~170 ms a task; it is what lets up to 200 of the fan-out's instances run at once.
CHAIN_CPU = 1.0
FAN_OUT_CPU = 0.01  # as bench/oneoff.py's job


@dataclass(frozen=True)
class Link:
    """Where one link of a chain spends its time, in ms, from the server's timestamps."""

    queue_ms: float  # the parent's finished_at → the child's queued_at (same transaction)
    place_ms: float  # queued → placed on the worker (the run's started_at)
    deliver_ms: float  # placed → handed to the worker by a claim (the attempt's delivered_at)
    run_ms: float  # delivered → finished: the worker starts the job, it runs, the end reported

    @property
    def successor_ms(self) -> float:
        return self.queue_ms + self.place_ms


@dataclass(frozen=True)
class Chain:
    server_seconds: float  # the workflow run's created_at → finished_at
    client_seconds: float  # the POST sent → the poll that saw it ended
    first: Link  # the first task: queue_ms from the workflow run's created_at
    links: list[Link]  # every task after the first


@dataclass(frozen=True)
class FanOut:
    items: int
    to_join_start_seconds: float  # the workflow run's created_at → the join's started_at
    to_end_seconds: float  # created_at → finished_at
    instances_seconds: float  # created_at → the last instance's finished_at

    @property
    def runs_per_second(self) -> float:
        return self.items / self.instances_seconds


@dataclass(frozen=True)
class WorkflowsResult:
    store: str
    isolation: Isolation
    chains: dict[str, list[Chain]]  # by the tasks' command ("true", "sleep")
    fan_out: FanOut
    statements_per_link: dict[str, float]  # the server's, by the tasks' command


def measure(store: str, database_url: str, home: Path, isolation: Isolation) -> WorkflowsResult:
    database = Database(database_url)
    try:
        with Herder(home, database_url, isolation) as herder, herder.client() as client:
            for name, command in COMMANDS.items():
                client.create_job(name, _job(command, CHAIN_CPU))
            fan_out_job = client.create_job("fan-out", _job("true", FAN_OUT_CPU))
            client.wait(client.start_run(fan_out_job.id).id, timeout=30)  # warm
            chains: dict[str, list[Chain]] = {}
            statements: dict[str, float] = {}
            for name in COMMANDS:
                workflow = client.create_workflow({"name": f"chain-{name}", "tasks": _chain(name)})
                _run(client, workflow.id, {}, CHAIN_POLL_SECONDS)  # warm: not counted
                chains[name] = [
                    _chain_result(client, database, workflow.id) for _ in range(CHAIN_REPEATS)
                ]
                statements[name] = _statements_per_link(herder, client, workflow.id)
            return WorkflowsResult(store, isolation, chains, _fan_out(client), statements)
    finally:
        database.dispose()


def _job(command: str, cpu: float) -> dict[str, Any]:
    return {**JOB, "command": command, "resources": {"cpu": cpu, "memory_mb": 8},
            "retry": {"max_attempts": 1}}  # fmt: skip


def _chain(job: str) -> list[dict[str, Any]]:
    names = [f"t{index:02d}" for index in range(CHAIN_LENGTH)]
    return [{"name": names[0], "job": job}] + [
        {"name": name, "job": job, "depends_on": [parent]}
        for parent, name in itertools.pairwise(names)
    ]


def _run(
    client: HerderClient, workflow_id: str, params: dict[str, Any], poll: float
) -> tuple[WorkflowRunDetail, float]:
    """Start a run and poll it until it ends: its detail, and the seconds the client saw."""
    sent = time.monotonic()
    run = client.start_workflow(workflow_id, params)
    deadline = sent + TIMEOUT_SECONDS
    while True:
        detail = client.get_workflow_run(run.id)
        if detail.state.is_terminal:
            seen = time.monotonic() - sent
            if detail.state != "succeeded":
                raise RuntimeError(f"workflow run {run.id} ended {detail.state}: {detail.reason}")
            return detail, seen
        if time.monotonic() > deadline:
            raise TimeoutError(f"workflow run {run.id} still {detail.state}")
        time.sleep(poll)


def _chain_result(client: HerderClient, database: Database, workflow_id: str) -> Chain:
    detail, seen = _run(client, workflow_id, {}, CHAIN_POLL_SECONDS)
    assert detail.finished_at is not None
    times = _run_times(database, [task.run_id for task in detail.tasks if task.run_id])
    ordered = [times[task.run_id] for task in detail.tasks if task.run_id]
    first = _link(detail.created_at, ordered[0])
    links = [_link(parent.finished, child) for parent, child in itertools.pairwise(ordered)]
    return Chain(_seconds(detail.created_at, detail.finished_at), seen, first, links)


def _statements_per_link(herder: Herder, client: HerderClient, workflow_id: str) -> float:
    """What the server sent the database for one more chain, per task, less the client's
    own polls of it: their cost is measured apart, on the chain run once it has ended."""
    before = sum(herder.statements().values())
    run, _ = _run(client, workflow_id, {}, STATEMENTS_POLL_SECONDS)
    chain = sum(herder.statements().values()) - before
    polls = round(_seconds(run.created_at, run.finished_at) / STATEMENTS_POLL_SECONDS) + 1
    before = sum(herder.statements().values())
    for _ in range(polls):
        client.get_workflow_run(run.id)
    return (chain - (sum(herder.statements().values()) - before)) / CHAIN_LENGTH


@dataclass(frozen=True)
class _Times:
    queued: datetime
    started: datetime
    delivered: datetime
    finished: datetime


def _run_times(database: Database, run_ids: list[str]) -> dict[str, _Times]:
    """Each run's queued, placed, delivered and finished instants (its only attempt's)."""
    with database.read() as connection:
        rows = connection.execute(
            select(
                runs.c.id,
                runs.c.queued_at,
                runs.c.started_at,
                attempts.c.delivered_at,
                runs.c.finished_at,
            )
            .join(attempts, attempts.c.run_id == runs.c.id)
            .where(runs.c.id.in_(run_ids))
        ).all()
    return {row.id: _Times(*row[1:]) for row in rows}


def _link(parent_end: datetime, child: _Times) -> Link:
    return Link(
        queue_ms=_seconds(parent_end, child.queued) * 1000,
        place_ms=_seconds(child.queued, child.started) * 1000,
        deliver_ms=_seconds(child.started, child.delivered) * 1000,
        run_ms=_seconds(child.delivered, child.finished) * 1000,
    )


def _fan_out(client: HerderClient) -> FanOut:
    workflow = client.create_workflow(
        {
            "name": "fan-out",
            "params": {"items": []},
            "tasks": [
                {"name": "each", "job": "fan-out", "map_over": "params.items"},
                {"name": "join", "job": "fan-out", "depends_on": ["each"]},
            ],
        }
    )
    detail, _ = _run(
        client, workflow.id, {"items": list(range(FAN_OUT))}, poll=FAN_OUT_POLL_SECONDS
    )
    assert detail.finished_at is not None
    (join,) = [task for task in detail.tasks if task.task == "join"]
    instances = [task for task in detail.tasks if task.task == "each"]
    assert join.started_at is not None
    assert len(instances) == FAN_OUT
    last = max(task.finished_at for task in instances if task.finished_at is not None)
    return FanOut(
        items=len(instances),
        to_join_start_seconds=_seconds(detail.created_at, join.started_at),
        to_end_seconds=_seconds(detail.created_at, detail.finished_at),
        instances_seconds=_seconds(detail.created_at, last),
    )


def _seconds(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def successor_ms(chains: list[Chain]) -> list[float]:
    return [link.successor_ms for chain in chains for link in chain.links]


def median_link(chains: list[Chain]) -> Link:
    """Each part's median over every link of the chains."""
    links = [link for chain in chains for link in chain.links]
    return Link(
        *(
            statistics.median(getattr(link, part) for link in links)
            for part in ("queue_ms", "place_ms", "deliver_ms", "run_ms")
        )
    )
