"""Resource limits enforced on real processes: cgroups where this host allows them, and the
rlimit fallback everywhere (it is what hosts without cgroups get).

Nothing here is skipped for want of cgroups: on such a host the tests assert what the fallback
does instead, and one test checks that the worker does use cgroups wherever they work.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.domain.jobs import RetryOutcome
from herder.domain.retry import OOM_REASON_PREFIX, retry_outcome
from herder.domain.states import AttemptState
from herder.worker.attempt_cgroup import AttemptCgroup
from herder.worker.cgroupfs import cgroup_membership
from herder.worker.cgroups import CgroupEnforcer
from herder.worker.executor import execute
from herder.worker.limits import MIB, Confinement, Enforcer, Limits, RlimitEnforcer
from herder.worker.outcome import Outcome
from herder.worker.process import LaunchPlan
from herder.worker.sandbox import SANDBOX_WORKSPACE, Sandbox, limit_enforcer
from herder.worker.uids import default_python
from herder.worker.workspace import prepare_workspace, remove_workspace
from tests.cgroups import attempt_cgroups, gone_soon
from tests.sandboxes import attempt_sandbox, launcher
from tests.waiting import eventually

SETPRIV = shutil.which("setpriv")
SANDBOX_UID = 190001

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
    path = prepare_workspace(tmp_path, f"att_limits_{os.getpid()}")
    yield path
    remove_workspace(path)


def in_cgroups(enforcer: Enforcer) -> bool:
    return isinstance(enforcer, CgroupEnforcer)


def run(
    enforcer: Enforcer,
    command: str,
    workspace: Path,
    limits: Limits,
    sandbox: Sandbox | None = None,
) -> tuple[Outcome, str, float]:
    """``workspace`` names the attempt's cgroup; with a ``sandbox`` the job runs inside it."""
    where = SANDBOX_WORKSPACE if sandbox is not None else workspace
    plan = LaunchPlan(
        ["/bin/sh", "-c", command], ENV, where, 30, 0.5, limits, sandbox, workspace.name
    )
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


@pytest.fixture
def own_uid(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Sandbox, Path]]:
    """A sandbox with a uid of its own, as a root worker runs attempts, and the name of its
    cgroup (as a path whose name it is)."""
    if os.geteuid() != 0:
        pytest.skip("an own uid for the attempt needs root")
    with attempt_sandbox(launcher(tmp_path_factory), SANDBOX_UID) as sandbox:
        yield sandbox, tmp_path / f"att_own_{os.getpid()}"


def test_the_process_count_is_bounded(enforcer: Enforcer, own_uid: tuple[Sandbox, Path]) -> None:
    sandbox, workspace = own_uid
    limits = Limits(256 * MIB, 1, max_processes=20)
    outcome, output, _ = run(enforcer, FORK_MANY, workspace, limits, sandbox)
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
        if in_cgroups(enforcer):  # killed at the attempt's end; a loaded box is slow to show it
            assert eventually(lambda: not alive(escaped), 5)
        else:
            assert alive(escaped)
    finally:
        if alive(escaped):
            os.kill(escaped, signal.SIGKILL)


def test_the_job_is_inside_its_cgroup_from_the_start_and_it_is_removed_after(
    enforcer: Enforcer, workspace: Path
) -> None:
    outcome, output, _ = run(enforcer, "cat /proc/self/cgroup", workspace, Limits(MIB * 64, 1))
    assert outcome.state is AttemptState.SUCCEEDED
    if isinstance(enforcer, CgroupEnforcer):
        inside = attempt_cgroups(enforcer, output)
        assert set(inside) >= ({"memory", "cpu", "pids"} if enforcer.version == 1 else {""})
        assert gone_soon(list(inside.values()))
    else:
        assert f"herder-test-{os.getpid()}" not in output


def test_a_sandboxed_job_is_inside_from_the_start(
    enforcer: Enforcer, own_uid: tuple[Sandbox, Path]
) -> None:
    sandbox, workspace = own_uid
    outcome, output, _ = run(
        enforcer, "id -u; cat /proc/self/cgroup", workspace, Limits(MIB * 64, 1), sandbox
    )
    assert outcome.state is AttemptState.SUCCEEDED, output
    uid, proc_cgroup = output.split("\n", 1)
    assert uid == str(sandbox.uid)
    if isinstance(enforcer, CgroupEnforcer):
        inside = attempt_cgroups(enforcer, proc_cgroup)
        assert set(inside) >= ({"memory", "cpu", "pids"} if enforcer.version == 1 else {""})
    else:
        assert f"herder-test-{os.getpid()}" not in output


def test_an_attempt_is_contained_only_when_its_cgroup_held_nothing_at_its_end(
    enforcer: Enforcer, workspace: Path
) -> None:
    """Only then may its uid go back without a sweep of every process of the host."""
    clean, _, _ = run(enforcer, "true", workspace, Limits(MIB * 64, 1))
    left, output, _ = run(enforcer, ESCAPE, workspace, Limits(MIB * 64, 1))
    escaped = int(output)
    try:
        assert clean.contained == in_cgroups(enforcer)
        assert not left.contained
    finally:
        if alive(escaped):
            os.kill(escaped, signal.SIGKILL)


def test_the_cpu_quota_is_not_spent_on_setting_the_attempt_up(
    enforcer: Enforcer, own_uid: tuple[Sandbox, Path]
) -> None:
    """Namespaces, mounts and the uid switch cost a few ms of CPU: charged to a job of 0.01
    cores (1 ms per 100 ms) they would hold a job that does nothing for 300 ms."""
    sandbox, workspace = own_uid
    took = min(
        run(enforcer, "true", workspace, Limits(MIB * 64, 0.01), sandbox)[2] for _ in range(3)
    )
    assert took < 0.1, took


def test_a_job_can_neither_leave_its_cgroup_nor_open_it_to_others(
    enforcer: Enforcer, own_uid: tuple[Sandbox, Path]
) -> None:
    if not isinstance(enforcer, CgroupEnforcer):
        pytest.skip("without cgroups there is no cgroup to leave")
    sandbox, workspace = own_uid
    files = ("tasks", "cgroup.procs")
    leave = [
        f"{{ echo 0 > {parent / file}; }} 2>/dev/null && echo left {parent}"
        for parent in enforcer.parents.values()
        for file in files
    ]
    share = [  # its own among them, whatever it is named
        f"chmod 666 {parent}/*/{file} 2>/dev/null && echo opened {file}"
        for parent in enforcer.parents.values()
        for file in files
    ]
    command = "; ".join([*leave, *share, "grep -c herder /proc/self/cgroup"])
    outcome, output, _ = run(enforcer, command, workspace, Limits(MIB * 64, 1), sandbox)
    assert outcome.state is AttemptState.SUCCEEDED
    hierarchies = len(set(enforcer.parents.values())) if enforcer.version == 1 else 1
    assert output == f"{hierarchies}\n"  # still inside each, and only there


def test_another_uid_cannot_enter_an_attempts_cgroup(enforcer: Enforcer) -> None:
    if os.geteuid() != 0 or not isinstance(enforcer, CgroupEnforcer) or SETPRIV is None:
        pytest.skip("needs root, setpriv and cgroups")
    owner, other = 190101, 190102
    name = f"att_other_{os.getpid()}"
    confinement = enforcer.confine(name, Limits(MIB * 64, 1), gid=owner, by_launcher=True)
    try:
        files = [
            str(entrance.parent / file)
            for entrance in confinement.entrances()
            for file in ("tasks", "cgroup.procs")
            if (entrance.parent / file).exists()
        ]
        switch = [SETPRIV, f"--reuid={other}", f"--regid={other}", "--clear-groups", "--"]
        script = 'for file; do { echo 0 > "$file"; } 2>/dev/null && echo "entered $file"; done'
        tries = subprocess.run(
            [*switch, "/bin/sh", "-c", script, "try", *files],
            capture_output=True,
            text=True,
            check=False,
        )
        assert files
        assert tries.stdout == ""
    finally:
        confinement.remove()


def own_cgroup_v2() -> tuple[Path, str] | None:
    """This process's cgroup in a writable cgroup v2 hierarchy, controllers or not: its
    directory, and its path as /proc/<pid>/cgroup says it."""
    membership = cgroup_membership(Path("/proc/self/cgroup").read_text())
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, options, *_ = line.split()
        if kind == "cgroup2" and "rw" in options.split(",") and "" in membership:
            return Path(point, membership[""].lstrip("/")), membership[""]
    return None


def bare_cgroup_v2(name: str, since: tuple[int, int], why: str) -> tuple[Path, str]:
    """A new cgroup ``name`` in this host's writable cgroup v2 hierarchy, with or without
    the controllers the worker needs: its directory, and the line /proc/<pid>/cgroup shows for
    a process in it. Skips the test where there is none, or the kernel is older than
    ``since`` (``why`` says what it lacks)."""
    found = own_cgroup_v2()
    if found is None:
        pytest.skip("no writable cgroup v2 hierarchy here")
    if tuple(map(int, os.uname().release.split(".")[:2])) < since:
        pytest.skip(why)
    home, path = found
    directory = home / f"{name}-{os.getpid()}"
    directory.mkdir()
    return directory, f"0::{path.rstrip('/')}/{directory.name}"


class BareCgroupV2:
    """An enforcer whose every attempt gets the one cgroup given: v2's way in, alone."""

    description = "a bare cgroup v2"

    def __init__(self, cgroup: AttemptCgroup) -> None:
        self.cgroup = cgroup

    def confine(
        self, name: str, limits: Limits, *, gid: int | None, by_launcher: bool = False
    ) -> Confinement:
        return self.cgroup

    def close(self) -> None:
        self.cgroup.remove()


def test_on_cgroup_v2_an_unsandboxed_job_enters_through_what_the_worker_opened(
    workspace: Path,
) -> None:
    """Isolation none: the job enters through the cgroup.procs descriptor the worker handed
    it as stdin, then gets /dev/null. Any cgroup v2 hierarchy shows it, with or without the
    memory controller the worker needs."""
    why = "Linux before 5.16 checks the writer, not the opener"
    directory, line = bare_cgroup_v2("herder-v2", (5, 16), why)
    cgroup = AttemptCgroup(2, {"memory": directory})
    enforcer = BareCgroupV2(cgroup)
    try:
        cgroup.open_entrance(before_switch=False)
        command = "grep ^0:: /proc/self/cgroup; ls -l /proc/self/fd/0"
        outcome, output, _ = run(enforcer, command, workspace, Limits(MIB, 1))
    finally:
        enforcer.close()
    assert outcome.state is AttemptState.SUCCEEDED, output
    membership, stdin = output.splitlines()
    assert membership == line
    assert stdin.endswith("/dev/null")
    assert not directory.exists()


def test_on_cgroup_v2_a_sandboxed_job_is_born_in_its_cgroup(
    own_uid: tuple[Sandbox, Path],
) -> None:
    """The launcher clones it into its cgroup (``clone3(CLONE_INTO_CGROUP)``): it never ran
    outside, and nothing was moved in. Any cgroup v2 hierarchy shows it, with or without the
    controllers the worker needs (a hybrid host's has none)."""
    directory, line = bare_cgroup_v2("herder-v2-born", (5, 7), "clone3 takes a cgroup since 5.7")
    sandbox, workspace = own_uid
    enforcer = BareCgroupV2(AttemptCgroup(2, {"memory": directory}))
    try:
        command = "grep ^0:: /proc/self/cgroup"
        outcome, output, _ = run(enforcer, command, workspace, Limits(MIB, 1), sandbox)
    finally:
        enforcer.close()
    assert outcome.state is AttemptState.SUCCEEDED, output
    assert output == f"{line}\n"
    assert not directory.exists()


def alive(pid: int) -> bool:
    """Running still: neither gone nor a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")
