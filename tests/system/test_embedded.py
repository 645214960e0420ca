"""``herder up`` as a user runs it: one process tree, a real worker, a real program."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.system.conftest import Cluster, alive, children_of, stop

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
