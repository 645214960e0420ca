"""The worker token is on no command line (issue 9, item 1): not ``herder up``'s local
worker's, not a worker started by hand, so no job can read it in /proc/PID/cmdline."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.system.conftest import Cluster, processes_matching, wait_until

pytestmark = pytest.mark.system

# what a job sees of every process's command line (all of them, without a PID namespace)
READ_COMMAND_LINES = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo; echo done"


def test_no_process_has_the_worker_token_on_its_command_line(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster(embedded=True)
    cluster.start_worker("by-hand")
    secret = cluster.worker_token.partition(".")[2]
    with cluster.client() as herder:
        wait_until(lambda: len(herder.list_workers()) == 2, 30, "both workers registered")
        job = herder.create_job("snoop", {"runtime": "shell", "command": READ_COMMAND_LINES})
        run = herder.wait(herder.start_run(job.id).id, timeout=30)
        seen = "".join(chunk.text for chunk in herder.logs(run.id).chunks)
    assert run.state == "succeeded"
    assert "done" in seen
    assert secret not in seen
    assert "wtk_" not in seen
    assert processes_matching(secret) == []
