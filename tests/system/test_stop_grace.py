"""A job's stop grace on a real worker, sandboxed or not: a cancel sends SIGTERM, waits the
job's ``stop_grace_seconds`` for it to save its work, then SIGKILLs it; the attempt says
which. A server and a worker of each isolation serve the module: the tests cancel runs, never
the cluster, each as a tenant of its own."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from herder.domain.models import RunDetail
from tests.system.conftest import ISOLATIONS, Cluster, processes_matching, unique_sleep, wait_until


@pytest.fixture(scope="module", params=ISOLATIONS)
def isolation(request: pytest.FixtureRequest) -> str:
    chosen: str = request.param
    return chosen


@pytest.fixture(scope="module")
def cluster(start_module_cluster: Callable[..., Cluster], isolation: str) -> Iterator[Cluster]:
    started = start_module_cluster()
    started.start_worker("w", "--isolation", isolation, "--max-stop-grace", "20")
    yield started
    started.stop_all()  # before the next isolation's


def _cancelled(
    cluster: Cluster, command: str, stop_grace_seconds: int
) -> tuple[RunDetail, str, float]:
    """Start ``command``, cancel it once it printed: the run, what it printed, and how long
    the cancel took."""
    spec = {"runtime": "shell", "command": command, "stop_grace_seconds": stop_grace_seconds}
    with cluster.new_tenant() as herder:
        run = herder.start_run(herder.create_job("graceful", spec).id)
        wait_until(lambda: bool(herder.logs(run.id).chunks), 20, "the job printed")
        asked = time.monotonic()
        herder.cancel_run(run.id)
        finished = herder.wait(run.id, timeout=30, poll=0.05)
        took = time.monotonic() - asked
        printed = "".join(chunk.text for chunk in herder.logs(run.id).chunks)
    return finished, printed, took


def test_a_job_that_saves_on_sigterm_within_its_grace_is_stopped_by_sigterm(
    cluster: Cluster, tmp_path: Path, isolation: str
) -> None:
    # outside the sandbox the saved file outlives the attempt; inside it, what it printed
    saved, sleep = (tmp_path / "saved" if isolation == "none" else "saved"), unique_sleep(600)
    command = f"trap 'echo step 41 > {saved}; cat {saved}; exit 0' TERM; echo up; {sleep} & wait"
    run, printed, took = _cancelled(cluster, command, stop_grace_seconds=20)
    (attempt,) = run.attempts
    assert (run.state, attempt.state, attempt.stopped_by) == ("cancelled", "cancelled", "sigterm")
    assert printed == "up\nstep 41\n"
    if isinstance(saved, Path):
        assert saved.read_text() == "step 41\n"
    assert took < 10.0, f"the cancel waited {took:.1f}s: the job had exited at SIGTERM"
    wait_until(lambda: not processes_matching(sleep), 5, "no sleep left behind")


def test_a_job_that_ignores_sigterm_is_killed_after_its_grace(cluster: Cluster) -> None:
    sleep = unique_sleep(600)
    run, _, took = _cancelled(cluster, f"trap '' TERM; echo up; {sleep} & wait", 1)
    (attempt,) = run.attempts
    assert (run.state, attempt.state, attempt.stopped_by) == ("cancelled", "cancelled", "sigkill")
    assert "SIGKILL after 1s grace" in (attempt.reason or "")
    assert took >= 1.0, f"killed {took:.2f}s after the cancel, within its 1 s grace"
    wait_until(lambda: not processes_matching(sleep), 5, "no sleep left behind")
