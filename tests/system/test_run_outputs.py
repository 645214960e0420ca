"""A real job's output and a real task's inputs, on a real worker: sandboxed (the default)
and at isolation none."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import select

from herder.client import HerderClient
from herder.domain.lifecycle.changes import TaskOf
from herder.domain.models import RunDetail
from herder.store.database import sqlite_url
from herder.store.schema import jobs
from herder.store.store import Store
from tests.system.conftest import Cluster
from tests.task_runs import insert_task_run

pytestmark = pytest.mark.system

ISOLATIONS = [
    pytest.param(
        "sandbox",
        marks=pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs a root worker"),
    ),
    "none",
]


@pytest.fixture(params=ISOLATIONS)
def cluster(request: pytest.FixtureRequest, start_cluster: Callable[..., Cluster]) -> Cluster:
    """``herder up`` (its local worker sandboxes), or a server and an isolation none worker."""
    if request.param == "sandbox":
        return start_cluster(embedded=True)
    started = start_cluster()
    started.start_worker("trusted", "--isolation", "none")
    return started


@pytest.fixture
def herder(cluster: Cluster) -> Iterator[HerderClient]:
    with cluster.client() as client:
        yield client


def finished(herder: HerderClient, name: str, command: str) -> tuple[RunDetail, str]:
    job = herder.create_job(name, {"runtime": "shell", "command": command})
    run = herder.wait(herder.start_run(job.id).id, timeout=60)
    return run, "".join(chunk.text for chunk in herder.logs(run.id).chunks)


def test_the_json_a_job_writes_is_its_runs_output(herder: HerderClient) -> None:
    run, logs = finished(herder, "rows", """echo '{"rows": 3}' > "$HERDER_OUTPUT" """)
    assert run.state == "succeeded", (run.reason, logs)
    assert run.output == {"rows": 3}


def test_a_job_that_writes_nothing_has_no_output(herder: HerderClient) -> None:
    run, _ = finished(herder, "quiet", "true")
    assert (run.state, run.output) == ("succeeded", None)


def test_an_output_over_64_kib_fails_the_run(herder: HerderClient) -> None:
    command = """printf '"%s"' "$(head -c 69998 /dev/zero | tr '\\0' x)" > "$HERDER_OUTPUT" """
    run, logs = finished(herder, "big", command)
    assert run.state == "failed", logs
    assert run.reason == (
        "the output written to $HERDER_OUTPUT is 70,000 bytes; at most 65,536 (64 KiB) are kept"
    )
    assert run.output is None


def test_an_output_that_is_not_json_fails_the_run(herder: HerderClient) -> None:
    run, _ = finished(herder, "prose", """echo 'rows: 3' > "$HERDER_OUTPUT" """)
    assert run.state == "failed"
    assert run.reason is not None
    assert run.reason.startswith("the output written to $HERDER_OUTPUT is not JSON: ")


def test_a_failed_jobs_output_is_not_kept(herder: HerderClient) -> None:
    run, _ = finished(herder, "half", """echo '{"rows": 3}' > "$HERDER_OUTPUT"; exit 2""")
    assert (run.state, run.output) == ("failed", None)
    assert run.reason == "exit 2"


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("link", 'ln -s /etc/passwd "$HERDER_OUTPUT"'),
        ("dir-link", 'rm -r "$(dirname "$HERDER_OUTPUT")" && ln -s /etc "$HOME/.herder"'),
        ("fifo", 'mkfifo "$HERDER_OUTPUT"'),
    ],
)
def test_a_link_or_fifo_as_output_fails_without_leaking_or_hanging(
    herder: HerderClient, name: str, command: str
) -> None:
    run, logs = finished(herder, name, command)
    assert run.state == "failed", logs
    assert run.reason is not None
    assert run.reason.startswith("the output written to $HERDER_OUTPUT could not be read")
    assert run.output is None
    assert "root:" not in json.dumps(run.model_dump(mode="json"))


def test_a_task_is_told_which_it_is_and_reads_its_inputs(
    herder: HerderClient, cluster: Cluster
) -> None:
    told = "$HERDER_WORKFLOW_RUN_ID/$HERDER_TASK/$HERDER_MAP_INDEX/$HERDER_MAP_ITEM"
    command = f'echo "{told}"; cat "$HERDER_INPUTS"'
    job = herder.create_job("task", {"runtime": "shell", "command": command})
    inputs = {"extract": {"rows": 3}, "shard": [{"n": 1}, None]}
    task = TaskOf("wfr_1", "load", repair=0, map_index=1, map_item="b", inputs=inputs)
    store = Store(sqlite_url(cluster.home / "herder.db"))
    try:
        with store.database.read() as connection:
            tenant_id = connection.execute(
                select(jobs.c.tenant_id).where(jobs.c.id == job.id)
            ).scalar_one()
        run_id = insert_task_run(store, tenant_id, job.id, task)
    finally:
        store.close()
    run = herder.wait(run_id, timeout=60)
    logs = "".join(chunk.text for chunk in herder.logs(run.id).chunks)
    assert run.state == "succeeded", (run.reason, logs)
    told, given = logs.split("\n", 1)
    assert told == 'wfr_1/load/1/"b"'
    assert json.loads(given) == inputs
    assert (run.workflow_run_id, run.task_name, run.map_index) == ("wfr_1", "load", 1)


def test_a_plain_run_is_told_no_task(herder: HerderClient) -> None:
    run, logs = finished(herder, "plain", 'echo "[$HERDER_TASK][$HERDER_INPUTS]"')
    assert run.state == "succeeded"
    assert logs == "[][]\n"
