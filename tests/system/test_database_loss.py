"""The database lost under a running system, then back (issue 43's first step): every call
meanwhile answers 503 with Retry-After, never a 500; a CLI submission made while it is down
rides the outage out and starts exactly one run; once it is back the run is placed, run and
reported, by the same server, scheduler and worker, none of them restarted, and the worker,
silent for longer than the heartbeat timeout, is not declared lost.

PostgreSQL here is a server of the test's own (``scripts/test-postgres.sh``), stopped at once
(``pg_ctl -m immediate``, as a kill -9 would) and started again on the same port.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from herder.domain.states import RunState
from tests.system.conftest import HERDER, START_SECONDS, Cluster, wait_until
from tests.system.own_postgres import OwnPostgres, own_postgres_server

pytestmark = [pytest.mark.system, pytest.mark.postgres]

OUTAGE_SECONDS = 4.0  # past the heartbeat timeout (3 s)


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    with own_postgres_server() as server:
        yield server


def test_a_lost_database_is_a_503_to_wait_out_and_the_system_goes_on(
    own_postgres: OwnPostgres, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster(own_postgres.url, fast=True)  # a worker silent 3 s is lost
    cluster.start_worker("w")
    with cluster.client() as herder:
        wait_until(lambda: len(herder.list_workers()) == 1, START_SECONDS, "the worker registered")
        (worker,) = herder.list_workers()
        job = herder.create_job("steady", {"runtime": "shell", "command": "echo ran"})
    key = cluster.credentials["api_key"]

    own_postgres.crash()
    calls = {
        ("GET", "/v1/runs"),
        ("GET", f"/v1/jobs/{job.id}"),
        ("POST", f"/v1/jobs/{job.id}/runs"),
        ("GET", "/v1/queue"),
        ("GET", "/readyz"),
    }
    with httpx.Client(base_url=cluster.url, timeout=30) as http:
        answers = {
            (method, path): http.request(method, path, headers={"Authorization": f"Bearer {key}"})
            for method, path in calls
        }
        assert http.get("/healthz").status_code == 200  # the process itself is alive
    for call, answer in answers.items():
        assert answer.status_code == 503, (call, answer.text)
        assert answer.headers["Retry-After"] == "1", call
        assert "database" in answer.json()["detail"], call

    said = cluster.home / "submission.err"
    with said.open("w") as stderr:
        submission = subprocess.Popen(
            [*HERDER, "run", "start", "steady", "--json"],
            env={**cluster.environment, "HERDER_RETRY_SECONDS": "60"},
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        wait_until(lambda: "trying again" in said.read_text(), 30, "the CLI waiting it out")
        time.sleep(OUTAGE_SECONDS)  # the outage goes on past the heartbeat timeout
        own_postgres.resume()
        printed, _ = submission.communicate(timeout=90)
    finally:
        submission.kill()
    assert submission.returncode == 0, said.read_text()

    with cluster.client() as herder:
        runs = herder.list_runs(job_id=job.id).items
        assert len(runs) == 1, "a submission tried again started a second run"
        assert runs[0].id in printed
        assert (runs[0].idempotency_key or "").startswith("cli-")
        ended = herder.wait(runs[0].id, timeout=START_SECONDS)
        # silent past the timeout, yet not lost: its first heartbeat came back before the
        # reaper judged (tests/integration/test_reaper.py pins the reaper's own grace)
        assert [(w.id, w.state) for w in herder.list_workers()] == [(worker.id, worker.state)]
    assert ended.state is RunState.SUCCEEDED, ended.reason
    assert ended.attempts[-1].worker_id == worker.id
