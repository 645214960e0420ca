"""A real job's output and a real task's inputs, on a real worker: sandboxed (the default)
and at isolation none."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from herder.client import HerderClient
from herder.domain.lifecycle.changes import TaskOf
from herder.settings import sqlite_url
from herder.store.schema import jobs
from herder.store.store import Store
from tests.system.conftest import Cluster
from tests.task_runs import insert_task_run

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def cluster(module_isolated_cluster: Cluster) -> Cluster:
    """One cluster of each isolation for the module: no test stops or reconfigures it."""
    return module_isolated_cluster


@pytest.fixture
def herder(cluster: Cluster) -> Iterator[HerderClient]:
    with cluster.new_tenant() as client:
        yield client


UNREADABLE = "the output written to $HERDER_OUTPUT could not be read"
BIG = """printf '"%s"' "$(head -c 69998 /dev/zero | tr '\\0' x)" > "$HERDER_OUTPUT" """

# name: (command, expected state, output, reason — or how it starts)
CASES: dict[str, tuple[str, str, object, str | None]] = {
    "rows": ("""echo '{"rows": 3}' > "$HERDER_OUTPUT" """, "succeeded", {"rows": 3}, None),
    "quiet": ("true", "succeeded", None, None),
    "big": (BIG, "failed", None,
            "the output written to $HERDER_OUTPUT is 70,000 bytes; at most 65,536 (64 KiB) "
            "are kept"),
    "prose": ("""echo 'rows: 3' > "$HERDER_OUTPUT" """, "failed", None,
              "the output written to $HERDER_OUTPUT is not JSON: "),
    "half": ("""echo '{"rows": 3}' > "$HERDER_OUTPUT"; exit 2""", "failed", None, "exit 2"),
    "link": ('ln -s /etc/passwd "$HERDER_OUTPUT"', "failed", None, UNREADABLE),
    "dir": ('mkdir "$HERDER_OUTPUT"', "failed", None, UNREADABLE),
    "fifo": ('mkfifo "$HERDER_OUTPUT"', "failed", None, UNREADABLE),
    "plain": ('echo "[$HERDER_TASK][$HERDER_INPUTS]" > "$HERDER_OUTPUT.txt"; '
              'printf \'"%s"\' "$(cat "$HERDER_OUTPUT.txt")" > "$HERDER_OUTPUT"',
              "succeeded", "[][]", None),
}  # fmt: skip


def test_what_a_job_writes_is_its_output_or_why_it_failed(herder: HerderClient) -> None:
    """Every case at once: JSON kept; nothing written, none; too big, not JSON, a link, a
    directory link or a FIFO fail the run with the reason, leaking nothing and hanging on
    nothing; a failed job's output is not kept; a plain run is told of no task."""
    started = {}
    for name, (command, *_) in CASES.items():
        job = herder.create_job(name, {"runtime": "shell", "command": command})
        started[name] = herder.start_run(job.id).id
    for name, run_id in started.items():
        run = herder.wait(run_id, timeout=60)
        _, state, output, reason = CASES[name]
        assert (run.state, run.output) == (state, output), (name, run.reason)
        if reason is not None:
            assert run.reason is not None, name
            assert run.reason.startswith(reason), (name, run.reason)
        assert "root:" not in json.dumps(run.model_dump(mode="json")), name


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
