"""``herder up`` as a user runs it: one process tree, a real worker, a real program."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from herder.client import HerderClient
from tests.system.conftest import (
    HERDER,
    Cluster,
    alive,
    children_of,
    free_port,
    herder_up,
    stop,
    wait_healthy,
)

pytestmark = pytest.mark.system


def test_hello_world_runs_end_to_end(start_cluster: Callable[..., Cluster], tmp_path: Path) -> None:
    cluster = start_cluster(embedded=True)
    script = tmp_path / "hello.py"
    script.write_text("print('Hello World!')\n")
    with cluster.client() as herder:
        artifact = herder.upload_artifact(script)
        job = herder.create_job("hello", {"runtime": "python", "artifact": artifact.id})
        run = herder.wait(herder.start_run(job.id).id, timeout=30)
        logs = herder.logs(run.id)
    assert run.state == "succeeded"
    assert run.exit_code == 0
    (attempt,) = run.attempts
    assert attempt.started_at is not None
    assert attempt.finished_at is not None
    assert attempt.started_at <= attempt.finished_at
    assert "".join(chunk.text for chunk in logs.chunks) == "Hello World!\n"
    assert logs.chunks[0].at >= attempt.started_at
    assert logs.complete


def test_ctrl_c_stops_the_server_and_its_worker(start_cluster: Callable[..., Cluster]) -> None:
    cluster = start_cluster(embedded=True)
    (up,) = cluster.processes
    deadline = time.monotonic() + 10
    while not children_of(up.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    (worker,) = children_of(up.pid)
    stop(up, signal.SIGINT)
    assert up.returncode in (0, 130)  # 130: the shell convention for Ctrl-C
    assert not alive(worker), "the local worker outlived herder up"


def test_herder_up_started_again_places_nothing_on_its_earlier_worker(
    start_cluster: Callable[..., Cluster],
) -> None:
    """Without being told, the earlier start's local worker looks alive until the reaper has
    watched it long enough to judge it silent, and a run placed on it would end lost. It is
    forgotten, not left listed as a lost ghost: one local worker is listed."""
    cluster = start_cluster(embedded=True)
    with cluster.client() as herder:
        job = herder.create_job("quick", {"runtime": "shell", "command": "true"})
        first = herder.wait(herder.start_run(job.id).id, timeout=30)
    (up,) = cluster.processes
    stop(up, signal.SIGINT)
    cluster.start_server()
    with cluster.client() as herder:
        again = herder.wait(herder.start_run(job.id).id, timeout=30)
        workers = {worker.id: worker.state for worker in herder.list_workers()}
    assert again.state == "succeeded", again.attempts[0].reason
    (earlier,), (later,) = first.attempts, again.attempts
    assert earlier.worker_id != later.worker_id
    assert workers == {later.worker_id: "alive"}


def test_ctrl_c_says_what_it_stops_and_its_runs_end_cancelled_by_the_shutdown(
    tmp_path: Path,
) -> None:
    """Not ``lost`` without a word: the line says how many runs stop and how they end, and
    each ends ``cancelled`` with the shutdown as its reason, reported by its worker."""
    home, port = tmp_path / "home", free_port()
    url = f"http://127.0.0.1:{port}"
    environment = {**os.environ, "HERDER_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    said = tmp_path / "up.out"
    with said.open("wb") as sink:
        up = subprocess.Popen([*HERDER, "up", "--port", str(port)], env=environment, stdout=sink)
    try:
        wait_healthy(url, up)
        key = json.loads((home / "client.json").read_text())["api_key"]
        with HerderClient(url, key) as herder:
            command = "echo started; exec sleep 300"
            job = herder.create_job("long", {"runtime": "shell", "command": command})
            run_ids = [herder.start_run(job.id).id for _ in range(2)]
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not all(
                "started" in "".join(chunk.text for chunk in herder.logs(run_id).chunks)
                for run_id in run_ids
            ):
                time.sleep(0.1)
        stop(up, signal.SIGINT)
    finally:
        stop(up)
    assert up.returncode in (0, 130)
    printed = " ".join(said.read_text().split())  # as wrapped to the terminal's width
    assert "Stopping: 2 runs are running on the local worker" in printed
    assert "ends cancelled, 'stopped: herder up was shut down'" in printed
    with herder_up(home) as (_, _, herder):
        ended = [herder.get_run(run_id) for run_id in run_ids]
        workers = herder.list_workers()
    for run in ended:
        assert run.state == "cancelled"
        assert run.reason is not None
        assert run.reason.startswith("stopped: herder up was shut down")  # then " (SIGTERM)"
        (attempt,) = run.attempts
        assert attempt.state == "cancelled"
        assert attempt.stopped_by == "sigterm"  # its worker stopped it and said so
    assert len(workers) == 1
