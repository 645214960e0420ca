"""Workflows on real processes: a DAG runs on real workers, its successors decided as each
task ends, and a kill -9 of the scheduler in the middle of it loses nothing and runs nothing
twice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from herder.client import HerderClient
from herder.store.database import Database
from herder.store.schema import attempts, runs
from tests.system.conftest import Cluster, wait_until

pytestmark = pytest.mark.system

# a diamond, then a chain: prepare → (left, right) → join → report → publish
TASKS: list[dict[str, Any]] = [
    {"name": "prepare", "job": "step"},
    {"name": "left", "job": "step", "depends_on": ["prepare"]},
    {"name": "right", "job": "step", "depends_on": ["prepare"]},
    {"name": "join", "job": "step", "depends_on": ["left", "right"]},
    {"name": "report", "job": "step", "depends_on": ["join"]},
    {"name": "publish", "job": "step", "depends_on": ["report"]},
]


def _setup(herder: HerderClient, command: str) -> str:
    wait_until(lambda: len(herder.list_workers()) == 1, 20, "the worker registered")
    spec = {"runtime": "shell", "command": command, "resources": {"cpu": 0.1, "memory_mb": 32}}
    herder.create_job("step", spec)
    return herder.create_workflow({"name": "pipeline", "tasks": TASKS}).id


def _state(herder: HerderClient, workflow_run_id: str) -> str:
    return str(herder.get_workflow_run(workflow_run_id).state)


def test_a_workflow_runs_on_real_workers(
    database_url: str, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster(database_url)
    cluster.start_worker("one", "--max-slots", "4")
    with cluster.client() as herder:
        workflow_id = _setup(herder, "true")
        run = herder.start_workflow(workflow_id)
        wait_until(lambda: _state(herder, run.id) == "succeeded", 30, "the workflow run ended")
        detail = herder.get_workflow_run(run.id)
    assert [task.state for task in detail.tasks] == ["succeeded"] * len(TASKS)
    ends = {task.task: task for task in detail.tasks}
    for task in TASKS:
        for parent in task.get("depends_on", []):
            child, upstream = ends[str(task["name"])], ends[str(parent)]
            assert child.started_at is not None
            assert upstream.finished_at is not None
            assert child.started_at >= upstream.finished_at  # none started before its rule


def test_killing_the_scheduler_mid_workflow_loses_nothing_and_runs_nothing_twice(
    database_url: str, start_cluster: Callable[..., Cluster]
) -> None:
    postgres = database_url.startswith("postgresql")
    # on SQLite the control loops live in the server process; on PostgreSQL in their own
    cluster = start_cluster(database_url, scheduler=not postgres, fast=True)
    scheduler = cluster.spawn("scheduler") if postgres else None
    cluster.start_worker("one", "--max-slots", "4")
    with cluster.client() as herder:
        workflow_id = _setup(herder, "sleep 0.3")
        run = herder.start_workflow(workflow_id)

        def joined() -> bool:
            return any(t.task == "join" and t.run_id for t in herder.get_workflow_run(run.id).tasks)

        wait_until(joined, 30, "the workflow reached its join")
    if scheduler is not None:
        scheduler.kill()
        scheduler.wait()
        cluster.spawn("scheduler")
    else:
        cluster.kill_server()
        cluster.start_server()
    with cluster.client() as herder:
        wait_until(lambda: _state(herder, run.id) == "succeeded", 60, "the workflow run ended")
        detail = herder.get_workflow_run(run.id)
    assert [task.state for task in detail.tasks] == ["succeeded"] * len(TASKS)
    database = Database(database_url)
    try:
        with database.read() as connection:
            per_task = connection.execute(
                select(runs.c.task_name, func.count(attempts.c.id))
                .join(attempts, attempts.c.run_id == runs.c.id)
                .where(runs.c.workflow_run_id == run.id, attempts.c.state == "succeeded")
                .group_by(runs.c.task_name)
            ).all()
            task_runs = connection.execute(
                select(func.count()).select_from(runs).where(runs.c.workflow_run_id == run.id)
            ).scalar_one()
    finally:
        database.dispose()
    assert dict(per_task) == {str(task["name"]): 1 for task in TASKS}  # one success each
    assert task_runs == len(TASKS)  # one run per task: none decided twice
