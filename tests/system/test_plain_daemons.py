"""At isolation none a job runs as the worker's user, with no namespace to take its processes
with it; still, a daemon it leaves (``setsid``, its parent gone) dies when its attempt ends,
and what the daemon used is charged to that attempt."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.system.conftest import Cluster, alive

pytestmark = pytest.mark.system

# the daemon spins and says its pid; the job ends once the daemon has used half a CPU-second
DAEMON_THEN_END = """
setsid sh -c 'echo $$ > daemon.pid; while :; do :; done' &
until [ -s daemon.pid ]; do sleep 0.01; done
daemon=$(cat daemon.pid)
echo "$daemon"
until [ "$(awk '{print $14 + $15}' /proc/$daemon/stat)" -ge $(( $(getconf CLK_TCK) / 2 )) ]; do
    sleep 0.01
done
"""


def test_a_daemon_a_job_left_dies_with_its_attempt_which_is_charged_its_cpu(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster()
    cluster.start_worker("w", "--isolation", "none")
    with cluster.client() as herder:
        job = herder.create_job("daemonizing", {"runtime": "shell", "command": DAEMON_THEN_END})
        run = herder.wait(herder.start_run(job.id).id, timeout=60)
        daemon = int("".join(chunk.text for chunk in herder.logs(run.id).chunks))
    # (had it outlived its attempt, it would die with the worker when the test ends)
    assert not alive(daemon), "the daemon outlived its attempt"  # reaped before the report
    assert run.state == "succeeded", run.reason
    (attempt,) = run.attempts
    assert attempt.cpu_user_seconds is not None
    assert attempt.cpu_system_seconds is not None
    assert attempt.cpu_user_seconds + attempt.cpu_system_seconds >= 0.45
