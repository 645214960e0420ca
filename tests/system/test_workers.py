"""Real workers against a real server: racing claims, timeouts, cancels, clean process trees."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select

from herder.store.database import Database
from herder.store.schema import attempts
from tests.system.conftest import Cluster, processes_matching, wait_until

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def cluster(start_module_cluster: Callable[..., Cluster]) -> Cluster:
    """A server and a worker for the tests that neither stop nor reconfigure them."""
    started = start_module_cluster()
    started.start_worker("w")
    return started


def test_two_workers_racing_for_200_runs_give_each_run_one_attempt(
    database_url: str, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster(database_url)
    for name in ("one", "two"):  # 20 slots each: neither can take all 200 runs alone
        cluster.start_worker(name, "--cpu", "2", "--max-slots", "20")
    with cluster.client() as herder:
        wait_until(lambda: len(herder.list_workers()) == 2, 20, "both workers registered")
        job = herder.create_job(
            "quick",
            {
                "runtime": "shell",
                "command": "sleep 0.1",
                "resources": {"cpu": 0.05, "memory_mb": 8},
            },
        )
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda _: herder.start_run(job.id), range(200)))

        def all_ended() -> bool:
            runs = herder.list_runs(job_id=job.id, limit=1000).items
            return all(run.state.is_terminal for run in runs)

        wait_until(all_ended, 90, "all 200 runs ended")
        runs = herder.list_runs(job_id=job.id, limit=1000).items
    assert len(runs) == 200
    assert {run.state for run in runs} == {"succeeded"}, [run.reason for run in runs]
    database = Database(database_url)
    with database.read() as connection:
        per_run = connection.execute(
            select(attempts.c.run_id, func.count()).group_by(attempts.c.run_id)
        ).all()
        workers = connection.execute(
            select(func.count(func.distinct(attempts.c.worker_id)))
        ).scalar()
    database.dispose()
    assert len(per_run) == 200
    assert {count for _, count in per_run} == {1}
    assert workers == 2


def test_a_run_past_its_timeout_is_timed_out_and_leaves_no_process(cluster: Cluster) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}"  # a sleep length unique to this test
    command = f"setsid sleep {marker} & sleep {marker} & echo started; wait"
    with cluster.new_tenant() as herder:
        job = herder.create_job(
            "slow", {"runtime": "shell", "command": command, "timeout_seconds": 1}
        )
        run = herder.wait(herder.start_run(job.id).id, timeout=30)
        logs = herder.logs(run.id)
    assert run.state == "timed_out"
    assert "timed out" in (run.reason or "")
    assert "".join(chunk.text for chunk in logs.chunks) == "started\n"
    wait_until(lambda: not processes_matching(f"sleep {marker}"), 5, "no sleep left behind")


def test_cancelling_a_running_run_kills_it_within_a_second_or_two(cluster: Cluster) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 2 * 10**6}"
    with cluster.new_tenant() as herder:
        job = herder.create_job(
            "forever", {"runtime": "shell", "command": f"echo up; sleep {marker}"}
        )
        run = herder.start_run(job.id)
        wait_until(lambda: bool(herder.logs(run.id).chunks), 20, "the job printed")
        asked = time.monotonic()
        assert herder.cancel_run(run.id).state == "running"
        finished = herder.wait(run.id, timeout=10, poll=0.05)
        took = time.monotonic() - asked
    assert finished.state == "cancelled"
    assert finished.attempts[0].state == "cancelled"
    assert took < 3.0, f"cancel took {took:.2f}s"
    wait_until(lambda: not processes_matching(f"sleep {marker}"), 5, "no sleep left behind")
