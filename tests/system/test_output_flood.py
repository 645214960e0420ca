"""A job that floods its output, on a real worker (sandboxed, and at isolation none): past the
8 MiB the worker keeps, its stdout and stderr are closed, so the flood costs the job (it dies
of SIGPIPE), not the worker, and the run says why."""

from __future__ import annotations

import pytest

from tests.system.conftest import Cluster

pytestmark = pytest.mark.system

FLOOD = {"runtime": "shell", "command": "cat /dev/zero", "timeout_seconds": 120}


def test_a_flood_fails_at_the_output_limit_instead_of_being_read_to_its_timeout(
    isolated_cluster: Cluster,
) -> None:
    with isolated_cluster.client() as herder:
        run = herder.start_run(herder.create_job("flood", FLOOD).id)
        finished = herder.wait(run.id, timeout=110)  # a flood still read would time out
        logs = herder.logs(run.id)
    assert finished.state == "failed"
    assert finished.reason is not None
    assert finished.reason.startswith(
        "output limit: it wrote more than 8.0 MiB, and its stdout and stderr were closed there; "
    ), finished.reason
    assert logs.chunks[-1].stream == "system"
    assert "output truncated" in logs.chunks[-1].text
    assert sum(len(chunk.text) for chunk in logs.chunks[:-1]) == 8 * 1024 * 1024
