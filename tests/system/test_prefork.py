"""``herder server --processes N``: several API processes on one port, supervised."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.system.conftest import HERDER, Cluster, alive, children_of, free_port, wait_until

pytestmark = [pytest.mark.system, pytest.mark.postgres]


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.timeout(240)  # above the sum of its waits: a loaded box may need them all
def test_api_processes_share_the_port_serve_runs_and_are_restarted_when_killed(
    start_cluster: Callable[..., Cluster], system_postgres_url: str
) -> None:
    cluster = start_cluster(system_postgres_url, processes=2)
    server = cluster.server
    assert server is not None
    children = children_of(server.pid)
    assert len(children) == 3  # two API processes and the control loops
    cluster.start_worker("w1", "--isolation", "none")
    with cluster.client() as client:
        job = client.create_job("hello", {"runtime": "shell", "command": "echo hi"})
        first = client.start_runs(job.id, 20)
        for run_id in first:
            assert client.wait(run_id, timeout=60).state == "succeeded"

        victim = children[0]
        os.kill(victim, signal.SIGKILL)
        wait_until(
            lambda: victim not in children_of(server.pid) and len(children_of(server.pid)) == 3,
            10,
            "a new process in place of the killed one",
        )
        wait_until(lambda: ready(cluster.url), 10, "the API answers")
        second = client.start_runs(job.id, 20)
        for run_id in second:
            assert client.wait(run_id, timeout=60).state == "succeeded"

    survivors = children_of(server.pid)
    server.send_signal(signal.SIGTERM)
    assert server.wait(20) == 0
    assert not any(alive(pid) for pid in survivors)
    assert not ready(cluster.url)


def test_more_than_one_process_on_sqlite_is_refused_in_one_line(tmp_path: Path) -> None:
    refused = subprocess.run(
        [*HERDER, "server", "--processes", "2", "--port", str(free_port())],
        env={**os.environ, "HERDER_HOME": str(tmp_path), "HERDER_DATABASE_URL": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 1
    assert "--processes above 1 needs PostgreSQL" in refused.stderr
    assert "Traceback" not in refused.stderr
