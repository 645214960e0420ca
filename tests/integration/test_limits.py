"""Resource limits enforced on real processes: cgroups where this host allows them, and the
rlimit fallback everywhere (it is what hosts without cgroups get).

Nothing here is skipped for want of cgroups: on such a host the tests assert what the fallback
does instead, and one test checks that the worker does use cgroups wherever they work.
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.domain.jobs import RetryOutcome
from herder.domain.retry import OOM_REASON_PREFIX, retry_outcome
from herder.domain.states import AttemptState
from herder.worker.cgroups import CgroupEnforcer
from herder.worker.executor import LaunchPlan, Outcome, execute
from herder.worker.limits import MIB, Enforcer, Limits, RlimitEnforcer
from herder.worker.sandbox import limit_enforcer
from herder.worker.uids import default_python, kill_processes_of_uid, reserve_uid_pool
from herder.worker.workspace import prepare_workspace, remove_workspace

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
PYTHON = default_python()
ALLOCATE = PYTHON + ' -c \'data = b"x" * ({mib} * 1024 * 1024); print("allocated")\''
ESCAPE = "setsid sleep 30 & echo $!; sleep 0.3"  # the pause: setsid has run before the end
FORK_MANY = (
    PYTHON
    + """ -c '
import os, time
started = 0
try:
    for _ in range(60):
        if os.fork() == 0:
            time.sleep(2)
            os._exit(0)
        started += 1
except OSError as error:
    print("fork refused:", error.strerror)
print("started", started)
'"""
)


def host_allows_cgroups() -> bool:
    """Asked of the host directly, not of the code under test: root, and a memory controller
    mounted read-write (cgroup v2 with memory available, or a cgroup v1 memory hierarchy)."""
    if os.geteuid() != 0:
        return False
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, options, *_ = line.split()
        flags = options.split(",")
        if "rw" not in flags:
            continue
        if kind == "cgroup" and "memory" in flags:
            return True
        controllers = Path(point, "cgroup.controllers")
        if kind == "cgroup2" and "memory" in controllers.read_text().split():
            return True
    return False


@pytest.fixture(params=["host", "rlimits"])
def enforcer(request: pytest.FixtureRequest) -> Iterator[Enforcer]:
    """What the worker picks on this host, and the fallback forced."""
    chosen: Enforcer
    if request.param == "host":
        chosen = limit_enforcer(f"test-{os.getpid()}")
    else:
        chosen = RlimitEnforcer("forced by the test")
    yield chosen
    chosen.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    path = prepare_workspace(tmp_path, f"att_limits_{os.getpid()}", None, None)
    yield path
    remove_workspace(path)


def in_cgroups(enforcer: Enforcer) -> bool:
    return isinstance(enforcer, CgroupEnforcer)


def run(
    enforcer: Enforcer,
    command: str,
    workspace: Path,
    limits: Limits,
    uid: int | None = None,
) -> tuple[Outcome, str, float]:
    plan = LaunchPlan(["/bin/sh", "-c", command], ENV, workspace, uid, uid, 30, 0.5, limits=limits)
    output: list[bytes] = []
    started = time.monotonic()
    outcome = asyncio.run(
        execute(plan, lambda _, data: output.append(data), asyncio.Event(), enforcer)
    )
    return outcome, b"".join(output).decode(), time.monotonic() - started


def test_the_worker_uses_cgroups_wherever_the_host_allows_them() -> None:
    enforcer = limit_enforcer(f"test-detect-{os.getpid()}")
    try:
        assert in_cgroups(enforcer) == host_allows_cgroups(), enforcer.description
    finally:
        enforcer.close()


def test_a_job_past_its_memory_request_is_stopped(enforcer: Enforcer, workspace: Path) -> None:
    outcome, output, _ = run(enforcer, ALLOCATE.format(mib=512), workspace, Limits(128 * MIB, 1))
    assert outcome.state is AttemptState.FAILED
    assert "allocated" not in output
    if in_cgroups(enforcer):  # the kernel kills it, and we can tell why
        assert outcome.reason.startswith(f"{OOM_REASON_PREFIX}: "), outcome.reason
        assert "128 MiB memory limit" in outcome.reason
        assert retry_outcome(outcome.state, outcome.reason) is RetryOutcome.OOM
        assert outcome.usage.max_rss_kb <= 130 * 1024
    else:  # the allocation fails inside the job, which reports it as it likes
        assert outcome.exit_code == 1
        assert "MemoryError" in output


def test_a_job_within_its_memory_request_runs(enforcer: Enforcer, workspace: Path) -> None:
    outcome, output, _ = run(enforcer, ALLOCATE.format(mib=64), workspace, Limits(256 * MIB, 1))
    assert (outcome.state, output) == (AttemptState.SUCCEEDED, "allocated\n")
    if in_cgroups(enforcer):  # the cgroup's peak: the job's own memory, not the worker's
        assert 64 * 1024 <= outcome.usage.max_rss_kb < 256 * 1024


def test_cpu_is_held_to_the_request_only_under_cgroups(enforcer: Enforcer, workspace: Path) -> None:
    burn = f"{PYTHON} -c 'import time\nwhile time.process_time() < 0.3: pass'"
    outcome, _, took = run(enforcer, burn, workspace, Limits(256 * MIB, 0.1))
    assert outcome.state is AttemptState.SUCCEEDED
    if in_cgroups(enforcer):  # 0.3 s of CPU at 0.1 cores: 3 s, less the first period's share
        assert took >= 2.0, took
    else:
        assert "no CPU limit" in enforcer.description


@pytest.mark.skipif(os.geteuid() != 0, reason="an own uid for the attempt needs root")
def test_the_process_count_is_bounded(enforcer: Enforcer, tmp_path: Path) -> None:
    pool, lock = reserve_uid_pool(190000, 4, Path(tempfile.gettempdir()))
    uid = pool.acquire()
    workspace = prepare_workspace(tmp_path, "att_forks", uid, uid)
    try:
        limits = Limits(256 * MIB, 1, max_processes=20)
        outcome, output, _ = run(enforcer, FORK_MANY, workspace, limits, uid)
    finally:
        kill_processes_of_uid(uid)
        lock.close()
    assert outcome.state is AttemptState.SUCCEEDED
    assert "fork refused: Resource temporarily unavailable" in output
    assert int(output.split()[-1]) < 20


def test_without_an_own_uid_only_a_cgroup_bounds_the_process_count(
    enforcer: Enforcer, workspace: Path
) -> None:
    limits = Limits(256 * MIB, 1, max_processes=20)
    outcome, output, _ = run(enforcer, FORK_MANY, workspace, limits)
    assert outcome.state is AttemptState.SUCCEEDED
    if in_cgroups(enforcer):
        assert "fork refused" in output
    else:  # RLIMIT_NPROC would count every process of the worker's user: not set
        assert output.split()[-1] == "60"


def test_a_process_that_left_the_group_dies_with_the_attempt_only_under_cgroups(
    enforcer: Enforcer, workspace: Path
) -> None:
    outcome, output, _ = run(enforcer, ESCAPE, workspace, Limits(MIB * 64, 1))
    escaped = int(output)
    assert outcome.state is AttemptState.SUCCEEDED
    try:
        assert alive(escaped) != in_cgroups(enforcer)
    finally:
        if alive(escaped):
            os.kill(escaped, signal.SIGKILL)


def test_the_job_is_inside_its_cgroup_from_the_start_and_it_is_removed_after(
    enforcer: Enforcer, workspace: Path
) -> None:
    outcome, output, _ = run(enforcer, "cat /proc/self/cgroup", workspace, Limits(MIB * 64, 1))
    assert outcome.state is AttemptState.SUCCEEDED
    lines = output.splitlines()
    inside = [line for line in lines if line.endswith(f"/{workspace.name}")]
    if isinstance(enforcer, CgroupEnforcer):
        assert {line.split(":")[1] for line in inside} >= (
            {"memory", "cpu", "pids"} if enforcer.version == 1 else {""}
        ), lines
        for parent in enforcer.parents.values():
            assert not (parent / workspace.name).exists()
    else:
        assert inside == []


def alive(pid: int) -> bool:
    """Running still: neither gone nor a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")
