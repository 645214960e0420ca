"""Past its output limit an attempt's stdout and stderr are closed: the worker reads no more of
a flood, whose cost stays with the job (it gets EPIPE, or dies of SIGPIPE), and the reason
says so. At isolation none by the worker itself or its launcher, and in the sandbox."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from herder.domain.states import AttemptState
from herder.worker.executor import StopRequest, execute
from herder.worker.launch_server import LaunchServer
from herder.worker.outcome import Outcome
from herder.worker.process import READ_CHUNK_BYTES, LaunchPlan
from herder.worker.sandbox import SANDBOX_WORKSPACE
from tests.sandboxes import attempt_sandbox, launcher, needs_root

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
LIMIT = 1024 * 1024
SANDBOX_UID = 190003
LIMITED = "output limit: it wrote more than 1.0 MiB, and its stdout and stderr were closed there"


def flood(plan: LaunchPlan) -> tuple[Outcome, int]:
    """The outcome of ``plan``, and how many bytes of output the worker read."""
    read = 0

    def count(_: str, data: bytes) -> None:
        nonlocal read
        read += len(data)

    async def go() -> Outcome:
        return await execute(plan, count, StopRequest())

    outcome = asyncio.run(go())
    return outcome, read


def plain(argv: list[str], cwd: Path, server: LaunchServer | None = None) -> LaunchPlan:
    """A minute's timeout: a flood that went on being read would time out."""
    return LaunchPlan(argv, ENV, cwd, 60, output_limit_bytes=LIMIT, launcher=server)


@pytest.mark.parametrize("by", ["worker", "launcher"])
def test_a_flood_past_the_limit_is_cut_off_and_fails_with_output_limit(
    tmp_path: Path, by: str
) -> None:
    server = LaunchServer.plain() if by == "launcher" else None
    try:
        outcome, read = flood(plain(["cat", "/dev/zero"], tmp_path, server))
    finally:
        if server is not None:
            server.close()
    assert outcome.state is AttemptState.FAILED  # not timed out: nothing went on reading it
    assert outcome.reason == f"{LIMITED}; killed by SIGPIPE"
    assert LIMIT < read <= LIMIT + READ_CHUNK_BYTES


def test_a_job_that_ignores_sigpipe_goes_on_and_may_succeed(tmp_path: Path) -> None:
    command = "trap '' PIPE; head -c 4000000 /dev/zero; echo gone >&2; exit 0"
    outcome, read = flood(plain(["sh", "-c", command], tmp_path))
    assert outcome.state is AttemptState.SUCCEEDED
    assert outcome.reason == f"exit 0; {LIMITED}"
    assert read <= LIMIT + READ_CHUNK_BYTES


def test_output_within_the_limit_is_read_whole(tmp_path: Path) -> None:
    outcome, read = flood(plain(["head", "-c", str(LIMIT), "/dev/zero"], tmp_path))
    assert (outcome.state, outcome.reason, read) == (AttemptState.SUCCEEDED, "exit 0", LIMIT)


@needs_root
def test_a_sandboxed_flood_is_cut_off_too(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with attempt_sandbox(launcher(tmp_path_factory), SANDBOX_UID) as sandbox:
        plan = LaunchPlan(
            ["cat", "/dev/zero"],
            ENV,
            SANDBOX_WORKSPACE,
            60,
            output_limit_bytes=LIMIT,
            sandbox=sandbox,
        )
        outcome, read = flood(plan)
    assert outcome.state is AttemptState.FAILED
    assert outcome.reason == f"{LIMITED}; killed by SIGPIPE"
    assert LIMIT < read <= LIMIT + READ_CHUNK_BYTES
