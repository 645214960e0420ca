"""A worker killed with ``kill -9`` takes its attempts with it, at every isolation level: every
process of the job, a ``setsid`` daemon included, is gone before the run is dispatched again,
so a job never runs twice at once. Heartbeats every 0.5 s, lost after 3 s."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from herder.client import HerderClient
from tests.system.conftest import (
    ISOLATIONS,
    Cluster,
    alive,
    kill_matching,
    processes_matching,
    unique_sleep,
    wait_until,
)

pytestmark = pytest.mark.system

HEARTBEAT_TIMEOUT = 3.0
RETRIES = {"max_attempts": 2, "initial_delay_seconds": 0}


def living(marker: str) -> list[int]:
    return [pid for pid in processes_matching(marker) if alive(pid)]


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_killed_workers_job_dies_with_it_before_its_run_is_dispatched_again(
    start_cluster: Callable[..., Cluster], isolation: str
) -> None:
    cluster = start_cluster(fast=True)
    daemon, main = unique_sleep(60), unique_sleep(60)
    # the first attempt leaves a daemon of its own session, and waits in a child of its shell
    command = f'if [ "$HERDER_ATTEMPT" = 1 ]; then setsid {daemon} & {main}; wait; fi'
    doomed = cluster.start_worker("doomed", "--isolation", isolation)
    herder: HerderClient
    with cluster.client() as herder:
        job = herder.create_job("long", {"runtime": "shell", "command": command, "retry": RETRIES})
        run = herder.start_run(job.id)
        # the shell's own command line names both sleeps: wait for the sleeps themselves
        wait_until(
            lambda: len(set(living(daemon) + living(main))) >= 3, 20, "the job's processes"
        )  # the shell, its sleep, the daemon
        job_processes = set(processes_matching(daemon) + processes_matching(main))
        cluster.start_worker("rescuer", "--isolation", "none")
        wait_until(lambda: len(herder.list_workers()) == 2, 20, "the rescuer registered")
        try:
            killed_at = datetime.now(UTC)
            doomed.kill()
            doomed.wait()
            wait_until(
                lambda: not any(alive(pid) for pid in job_processes), 5, "the job's processes gone"
            )
            gone_at = datetime.now(UTC)
            not_yet = herder.get_run(run.id)
            finished = herder.wait(run.id, timeout=HEARTBEAT_TIMEOUT + 20)
        finally:
            kill_matching(daemon)  # only if the test failed: nothing else would end them
            kill_matching(main)
    again = finished.attempts[1].started_at
    assert again is not None
    gone, dispatched = ((at - killed_at).total_seconds() for at in (gone_at, again))
    print(f"the job's processes gone {gone:.2f}s after the kill; run again after {dispatched:.2f}s")
    assert not_yet.attempt_count == 1, not_yet  # gone while the run had not been re-dispatched
    assert finished.state == "succeeded"
    assert [attempt.state for attempt in finished.attempts] == ["lost", "succeeded"]
    assert again > gone_at
