"""The executor and the workspace against real processes, real files and real signals."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import stat
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import uvloop

from herder.domain.jobs import JobSpec, Runtime
from herder.domain.states import AttemptState, StoppedBy
from herder.worker.executor import StopRequest, execute
from herder.worker.launch_server import LaunchServer
from herder.worker.outcome import Outcome
from herder.worker.process import LaunchPlan
from herder.worker.sandbox import SANDBOX_WORKSPACE, Sandbox
from herder.worker.uids import default_python
from herder.worker.workspace import (
    build_plan,
    place_artifact,
    prepare_workspace,
    remove_workspace,
)
from tests.sandboxes import attempt_sandbox, launcher, needs_root
from tests.waiting import eventually

SANDBOX_UID = 190005
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
LOOPS = [
    pytest.param(None, id="asyncio"),
    pytest.param(uvloop.new_event_loop, id="uvloop"),
]

LoopFactory = Callable[[], asyncio.AbstractEventLoop] | None
T = TypeVar("T")


class Output:
    """An output sink that keeps everything it is given."""

    def __init__(self) -> None:
        self.chunks: list[tuple[str, bytes]] = []

    def __call__(self, stream: str, data: bytes) -> None:
        self.chunks.append((stream, data))

    def of(self, stream: str) -> str:
        return b"".join(data for name, data in self.chunks if name == stream).decode()


def run(coroutine: Coroutine[Any, Any, T], loop_factory: LoopFactory = None) -> T:
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(coroutine)


def shell(
    command: str,
    cwd: Path,
    *,
    timeout: float = 10.0,
    grace: float = 0.5,
    sandbox: Sandbox | None = None,
    cancel_after: float | None = None,
    loop_factory: LoopFactory = None,
) -> tuple[Outcome, Output, float]:
    """Run ``sh -c command``; return its outcome, its output and how long it took."""
    where = SANDBOX_WORKSPACE if sandbox is not None else cwd
    plan = LaunchPlan(["/bin/sh", "-c", command], ENV, where, timeout, grace, sandbox=sandbox)
    output = Output()

    async def go() -> Outcome:
        cancel = asyncio.Event()
        if cancel_after is not None:
            asyncio.get_running_loop().call_later(cancel_after, cancel.set)
        return await execute(plan, output, cancel)

    started = time.monotonic()
    outcome = run(go(), loop_factory)
    return outcome, output, time.monotonic() - started


def living(predicate: Callable[[int, str, str], bool]) -> list[int]:
    """Pids of processes that have not exited (zombies excluded) and match the predicate."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
            status = (entry / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if stat_line.rsplit(")", 1)[1].split()[0] not in ("Z", "X") and predicate(
            int(entry.name), stat_line, status
        ):
            found.append(int(entry.name))
    return found


def living_in_group(pgid: int) -> list[int]:
    return living(lambda _, stat_line, __: int(stat_line.rsplit(")", 1)[1].split()[2]) == pgid)


def group_exists(pgid: int) -> bool:
    """Any process of the group, a zombie not yet reaped included."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def living_of_uid(uid: int) -> list[int]:
    def has_uid(_: int, __: str, status: str) -> bool:
        line = next(line for line in status.splitlines() if line.startswith("Uid:"))
        return line.split()[1] == str(uid)

    return living(has_uid)


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    path = prepare_workspace(tmp_path / "attempts", "att_1")
    yield path
    remove_workspace(path)


# --- output and exit ----------------------------------------------------------------------


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_both_streams_arrive_each_in_order(workspace: Path, loop_factory: LoopFactory) -> None:
    command = 'i=0; while [ $i -lt 300 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done'
    outcome, output, _ = shell(command, workspace, loop_factory=loop_factory)
    assert outcome.state is AttemptState.SUCCEEDED
    assert output.of("stdout") == "".join(f"out {i}\n" for i in range(300))
    assert output.of("stderr") == "".join(f"err {i}\n" for i in range(300))


def test_everything_written_just_before_exit_is_delivered(workspace: Path) -> None:
    outcome, output, _ = shell("head -c 3000000 /dev/zero", workspace)
    assert outcome.state is AttemptState.SUCCEEDED
    assert len(output.of("stdout")) == 3_000_000


@pytest.mark.parametrize(
    ("command", "state", "exit_code", "reason"),
    [
        ("exit 0", AttemptState.SUCCEEDED, 0, "exit 0"),
        ("exit 3", AttemptState.FAILED, 3, "exit 3"),
        ("kill -SEGV $$", AttemptState.FAILED, None, "killed by SIGSEGV"),
        ("kill -KILL $$", AttemptState.FAILED, None, "killed by SIGKILL (possibly out of memory)"),
    ],
)
def test_how_the_process_ended_is_reported(
    workspace: Path, command: str, state: AttemptState, exit_code: int | None, reason: str
) -> None:
    outcome, _, _ = shell(command, workspace)
    assert (outcome.state, outcome.exit_code, outcome.reason) == (state, exit_code, reason)


def test_environment_is_exactly_the_plan(workspace: Path) -> None:
    outcome, output, _ = shell("env | sort; pwd", workspace)
    assert outcome.state is AttemptState.SUCCEEDED
    lines = output.of("stdout").splitlines()
    assert lines[-1] == str(workspace)
    assert {line.split("=", 1)[0] for line in lines[:-1]} <= {*ENV, "PWD"}


@pytest.mark.parametrize(
    ("program", "mode", "error"),
    [("missing", None, "No such file or directory"), ("not-executable", 0o644, "Permission")],
)
def test_a_program_that_cannot_start_fails_without_raising(
    workspace: Path, program: str, mode: int | None, error: str
) -> None:
    path = workspace / program
    if mode is not None:
        path.write_text("#!/bin/sh\n")
        path.chmod(mode)
    plan = LaunchPlan([str(path)], ENV, workspace, 5.0)
    outcome = run(execute(plan, Output(), asyncio.Event()))
    assert outcome.state is AttemptState.FAILED
    assert outcome.exit_code is None
    assert outcome.reason.startswith("could not start: ")
    assert error in outcome.reason


def test_resource_usage_counts_the_cpu_the_job_burned(workspace: Path) -> None:
    python = default_python()
    busy = f"{python} -c 'n = 0\nfor i in range(10_000_000): n += i'"  # no syscalls: user time
    idle, _, _ = shell("true", workspace)
    burned, _, _ = shell(busy, workspace)
    for usage in (idle.usage, burned.usage):
        assert usage.cpu_user_seconds >= 0
        assert usage.cpu_system_seconds >= 0
        assert usage.max_rss_kb > 0
        assert usage.wall_seconds > 0
    assert burned.usage.cpu_user_seconds > idle.usage.cpu_user_seconds + 0.2
    assert burned.usage.wall_seconds >= burned.usage.cpu_user_seconds * 0.9


# --- timeout, cancel and what is left behind ------------------------------------------------


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_timeout_terminates_the_whole_group(workspace: Path, loop_factory: LoopFactory) -> None:
    outcome, output, took = shell(
        "echo $$; exec sleep 30", workspace, timeout=0.5, grace=0.5, loop_factory=loop_factory
    )
    assert outcome.state is AttemptState.TIMED_OUT
    assert outcome.reason == "timed out after 0.5s (SIGTERM)"
    assert (outcome.exit_code, outcome.stopped_by) == (None, StoppedBy.SIGTERM)
    assert took < 2.0
    with pytest.raises(ProcessLookupError):
        os.killpg(int(output.of("stdout")), 0)


def test_a_job_ignoring_sigterm_is_killed_after_the_grace(workspace: Path) -> None:
    outcome, output, took = shell(
        "trap '' TERM; echo $$; sleep 30 & sleep 30", workspace, timeout=0.5, grace=0.5
    )
    assert outcome.state is AttemptState.TIMED_OUT
    assert outcome.reason == "timed out after 0.5s (SIGTERM, then SIGKILL after 0.5s grace)"
    assert outcome.stopped_by is StoppedBy.SIGKILL
    assert 1.0 <= took < 2.0
    group = int(output.of("stdout"))
    assert eventually(lambda: not living_in_group(group)), living_in_group(group)


def test_a_job_saves_its_work_on_sigterm_within_its_grace(workspace: Path) -> None:
    outcome, _, took = shell(
        "trap 'echo saved > state; exit 0' TERM; sleep 30 & wait", workspace, timeout=0.5, grace=5
    )
    assert (outcome.state, outcome.stopped_by) == (AttemptState.TIMED_OUT, StoppedBy.SIGTERM)
    assert (workspace / "state").read_text() == "saved\n"
    assert took < 5.0


def test_no_stop_grace_kills_at_once_without_a_sigterm(workspace: Path) -> None:
    outcome, _, took = shell(
        "trap 'echo saved > state' TERM; sleep 30 & wait", workspace, timeout=0.5, grace=0
    )
    assert outcome.reason == "timed out after 0.5s (SIGKILL, no stop grace)"
    assert outcome.stopped_by is StoppedBy.SIGKILL
    assert not (workspace / "state").exists()
    assert took < 2.0


def test_a_job_that_ends_by_itself_was_stopped_by_nothing(workspace: Path) -> None:
    outcome, _, _ = shell("exit 3", workspace)
    assert (outcome.state, outcome.stopped_by) == (AttemptState.FAILED, None)


def test_what_the_job_left_in_its_group_is_killed_when_it_exits(workspace: Path) -> None:
    outcome, output, _ = shell("echo $$; sleep 30 & exit 0", workspace)
    assert outcome.state is AttemptState.SUCCEEDED
    group = int(output.of("stdout"))
    assert eventually(lambda: not living_in_group(group)), living_in_group(group)


@needs_root
def test_a_grandchild_that_left_the_group_dies_with_the_sandbox(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with attempt_sandbox(launcher(tmp_path_factory), SANDBOX_UID) as sandbox:
        outcome, output, took = shell(
            "id -u; id -G; setsid sleep 30 & echo $!", tmp_path, sandbox=sandbox
        )
        uid, groups, _ = output.of("stdout").split()
        assert outcome.state is AttemptState.SUCCEEDED
        assert (uid, groups) == (str(SANDBOX_UID), str(SANDBOX_UID))
        assert took < 1.0  # the escaped sleep held the pipes, yet the end was not held up
        # its PID namespace ended with the job: nothing of the uid survives, no sweep needed
        assert eventually(lambda: not living_of_uid(SANDBOX_UID)), living_of_uid(SANDBOX_UID)


def sandboxed(command: str, factory: pytest.TempPathFactory) -> str:
    """What ``command`` printed, run to success in a sandbox of its own."""
    with attempt_sandbox(launcher(factory), SANDBOX_UID) as sandbox:
        outcome, output, _ = shell(command, factory.getbasetemp(), sandbox=sandbox)
    assert outcome.state is AttemptState.SUCCEEDED, outcome.reason
    return output.of("stdout")


@needs_root
def test_a_sandboxed_job_holds_no_descriptor_but_its_own(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Not the launcher's socket (which starts processes as root), not its disk's mount."""
    listed = sandboxed("ls /proc/self/fd", tmp_path_factory)
    assert listed.split() == ["0", "1", "2", "3"]  # 3: ls reading the directory


@needs_root
def test_what_a_sandboxed_job_can_write_is_nosuid_and_nodev_and_the_rest_read_only(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    mounts = sandboxed("cat /proc/self/mountinfo", tmp_path_factory)
    options = {line.split()[4]: set(line.split()[5].split(",")) for line in mounts.splitlines()}
    for writable in ("/workspace", "/tmp", "/var/tmp", "/dev/shm"):
        assert {"rw", "nosuid", "nodev"} <= options[writable], (writable, options[writable])
    for system in ("/", "/usr", "/etc", "/sys"):
        assert {"ro", "nosuid"} <= options[system], (system, options[system])


@needs_root
def test_an_attempt_given_a_gpu_sees_its_device_and_no_other(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = tmp_path / "dev"  # the host's GPUs, as null and zero devices
    host.mkdir()
    for name, minor in (("nvidia0", 3), ("nvidia1", 3), ("nvidiactl", 5)):
        os.mknod(host / name, stat.S_IFCHR, os.makedev(1, minor))
        os.chmod(host / name, 0o666)
    monkeypatch.setattr("herder.worker.sandbox.HOST_DEVICES", host)
    command = "ls /dev; echo written > /dev/nvidia1 && head -c 2 /dev/nvidiactl | od -An -tx1"
    with attempt_sandbox(launcher(tmp_path_factory), SANDBOX_UID, gpu_indices=(1,)) as sandbox:
        outcome, output, _ = shell(command, tmp_path, sandbox=sandbox)
    assert outcome.state is AttemptState.SUCCEEDED, output.of("stderr")
    *listed, zeros = output.of("stdout").splitlines()
    assert set(listed) == {
        "fd", "full", "null", "nvidia1", "nvidiactl", "random", "shm", "stderr", "stdin",
        "stdout", "tty", "urandom", "zero",
    }  # fmt: skip
    assert zeros.split() == ["00", "00"]


@needs_root
def test_a_launcher_that_died_is_started_again(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    shared = launcher(tmp_path_factory)
    server = LaunchServer(shared.command, shared.name)
    try:
        with attempt_sandbox(server, SANDBOX_UID) as sandbox:
            first, _, _ = shell("true", tmp_path, sandbox=sandbox)
        assert server.pid is not None
        gone = os.pidfd_open(server.pid)
        os.kill(server.pid, signal.SIGKILL)
        select.select([gone], [], [])  # readable once it has exited
        os.close(gone)
        with attempt_sandbox(server, SANDBOX_UID) as sandbox:
            second, output, _ = shell("echo again", tmp_path, sandbox=sandbox)
        assert (first.state, second.state) == (AttemptState.SUCCEEDED, AttemptState.SUCCEEDED)
        assert output.of("stdout") == "again\n"
    finally:
        server.close()


def test_an_escaped_grandchild_holding_the_pipes_does_not_hang_the_end(workspace: Path) -> None:
    outcome, output, took = shell("setsid sleep 30 & echo $!; echo done", workspace)
    escaped, done = output.of("stdout").split()
    os.kill(int(escaped), signal.SIGKILL)  # without an own uid nothing can catch it: clean up
    assert outcome.state is AttemptState.SUCCEEDED
    assert done == "done"
    assert took < 2.0


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_cancel_terminates_the_attempt(workspace: Path, loop_factory: LoopFactory) -> None:
    outcome, _, took = shell("sleep 30", workspace, cancel_after=0.2, loop_factory=loop_factory)
    assert outcome.state is AttemptState.CANCELLED
    assert outcome.reason == "cancelled (SIGTERM)"
    assert took < 1.5


PREEMPTED = "preempted by a higher-priority run"


def stop_after(seconds: float, *stops: tuple[AttemptState, str]) -> Callable[[], StopRequest]:
    """A StopRequest that receives ``stops`` in order, ``seconds`` after the start."""

    def make() -> StopRequest:
        request = StopRequest()
        for state, reason in stops:
            asyncio.get_running_loop().call_later(seconds, request.stop, state, reason)
        return request

    return make


def stopped(
    command: str, workspace: Path, make: Callable[[], StopRequest]
) -> tuple[Outcome, float]:
    plan = LaunchPlan(["/bin/sh", "-c", command], ENV, workspace, 30, 0.5)

    async def go() -> Outcome:
        return await execute(plan, Output(), make())

    started = time.monotonic()
    outcome = run(go())
    return outcome, time.monotonic() - started


def test_preemption_stops_the_attempt_like_a_cancel_but_says_preempted(workspace: Path) -> None:
    preempt = stop_after(0.2, (AttemptState.PREEMPTED, PREEMPTED))
    outcome, took = stopped("trap '' TERM; sleep 30", workspace, preempt)
    assert outcome.state is AttemptState.PREEMPTED
    assert outcome.reason == f"{PREEMPTED} (SIGTERM, then SIGKILL after 0.5s grace)"
    assert outcome.stopped_by is StoppedBy.SIGKILL
    assert 0.7 <= took < 2.0


def test_a_preempted_job_that_obeys_sigterm_ends_at_once(workspace: Path) -> None:
    preempt = stop_after(0.2, (AttemptState.PREEMPTED, PREEMPTED))
    outcome, took = stopped("sleep 30", workspace, preempt)
    assert (outcome.state, outcome.reason) == (AttemptState.PREEMPTED, f"{PREEMPTED} (SIGTERM)")
    assert outcome.stopped_by is StoppedBy.SIGTERM
    assert took < 0.7


def test_the_first_reason_to_stop_is_the_one_reported(workspace: Path) -> None:
    both = stop_after(
        0.2, (AttemptState.CANCELLED, "cancelled"), (AttemptState.PREEMPTED, PREEMPTED)
    )
    outcome, _ = stopped("sleep 30", workspace, both)
    assert (outcome.state, outcome.reason) == (AttemptState.CANCELLED, "cancelled (SIGTERM)")


def test_an_attempt_preempted_before_it_starts_never_runs(workspace: Path) -> None:
    def already() -> StopRequest:
        request = StopRequest()
        request.stop(AttemptState.PREEMPTED, PREEMPTED)
        return request

    outcome, _ = stopped("touch ran", workspace, already)
    assert (outcome.state, outcome.reason) == (
        AttemptState.PREEMPTED,
        f"{PREEMPTED} before it started",
    )
    assert not (workspace / "ran").exists()


def test_an_attempt_cancelled_before_it_starts_never_runs(workspace: Path) -> None:
    plan = LaunchPlan(["/bin/sh", "-c", "touch ran"], ENV, workspace, 5.0)
    cancel = asyncio.Event()
    cancel.set()
    outcome = run(execute(plan, Output(), cancel))
    assert (outcome.state, outcome.exit_code) == (AttemptState.CANCELLED, None)
    assert not (workspace / "ran").exists()


def test_a_failing_output_sink_stops_the_attempt_and_is_raised(workspace: Path) -> None:
    def broken(stream: str, data: bytes) -> None:
        raise RuntimeError("sink is broken")

    plan = LaunchPlan(["/bin/sh", "-c", "echo hi; exec sleep 30"], ENV, workspace, 30)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="sink is broken"):
        run(execute(plan, broken, asyncio.Event()))
    assert time.monotonic() - started < 2.0


def test_cancelling_execute_itself_leaves_nothing_running(workspace: Path) -> None:
    plan = LaunchPlan(["/bin/sh", "-c", "echo $$; exec sleep 30"], ENV, workspace, 30)
    output = Output()

    async def cancel_midway() -> None:
        task = asyncio.create_task(execute(plan, output, asyncio.Event()))
        while not output.of("stdout").endswith("\n"):  # the job has started: it printed its pid
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline = time.monotonic() + 1.0
        while group_exists(int(output.of("stdout"))) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # the loop reaps the process once it is gone

    run(cancel_midway())
    with pytest.raises(ProcessLookupError):
        os.killpg(int(output.of("stdout")), 0)


# --- workspace ------------------------------------------------------------------------------


def test_workspace_is_private(tmp_path: Path) -> None:
    path = prepare_workspace(tmp_path / "attempts", "att_2")
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0o011  # enter, never list


def test_a_leftover_workspace_is_replaced_by_an_empty_one(tmp_path: Path) -> None:
    (tmp_path / "att_4").mkdir()
    (tmp_path / "att_4" / "stale").write_text("old")
    assert list(prepare_workspace(tmp_path, "att_4").iterdir()) == []


def test_remove_workspace_gets_through_read_only_directories(workspace: Path) -> None:
    locked = workspace / "a" / "b"
    locked.mkdir(parents=True)
    (locked / "file").write_text("x")
    (locked / "file").chmod(0o400)
    locked.chmod(0o500)
    (workspace / "a").chmod(0o000)
    remove_workspace(workspace)
    assert not workspace.exists()
    remove_workspace(workspace)  # already gone: nothing to do


@pytest.mark.parametrize("uid", [None, pytest.param(SANDBOX_UID, marks=needs_root)])
def test_place_artifact_copies_into_the_workspace(
    workspace: Path, tmp_path: Path, uid: int | None
) -> None:
    cached = tmp_path / "cached"
    cached.write_bytes(b"#!/bin/sh\necho placed\n")
    placed = place_artifact(workspace, cached, "program", executable=True, uid=uid, gid=uid)
    info = placed.stat()
    assert placed.read_bytes() == cached.read_bytes()
    assert info.st_ino != cached.stat().st_ino
    assert stat.S_IMODE(info.st_mode) == 0o700
    assert info.st_uid == (uid if uid is not None else os.getuid())
    assert stat.S_IMODE(cached.stat().st_mode) == 0o644  # the cached copy is untouched


# --- launch plans ---------------------------------------------------------------------------

SHA = "a" * 64


@pytest.mark.parametrize(
    ("spec", "program", "argv"),
    [
        (
            JobSpec(runtime=Runtime.SHELL, command="echo $1", args=["hi"]),
            None,
            ["/bin/sh", "-c", "echo $1", "herder", "hi"],
        ),
        (
            JobSpec(runtime=Runtime.ARCHIVE, command="./run.sh", artifact=SHA, args=["-v"]),
            None,
            ["/bin/sh", "-c", "./run.sh", "herder", "-v"],
        ),
        (
            JobSpec(runtime=Runtime.PYTHON, artifact=SHA, args=["x"]),
            Path("main.py"),
            ["/usr/bin/python3", "/w/main.py", "x"],
        ),
        (
            JobSpec(runtime=Runtime.EXECUTABLE, artifact=SHA),
            Path("/w/program"),
            ["/w/program"],
        ),
    ],
)
def test_build_plan_turns_each_runtime_into_argv(
    spec: JobSpec, program: Path | None, argv: list[str]
) -> None:
    plan = build_plan(spec, Path("/w"), program, ENV, "/usr/bin/python3", 60, name="att_1")
    assert plan.argv == argv
    assert (plan.env, plan.cwd, plan.cgroup_name) == (ENV, Path("/w"), "att_1")
    assert (plan.timeout_seconds, plan.stop_grace_seconds) == (60, spec.stop_grace_seconds)


@pytest.mark.parametrize(
    ("job_grace", "worker_cap", "granted"),
    [(30, 600, 30), (30, 1, 1), (0, 1, 0), (600, 600, 600), (5, 0.5, 0.5)],
)
def test_a_job_gets_its_stop_grace_cut_to_the_workers_cap(
    job_grace: int, worker_cap: float, granted: float
) -> None:
    spec = JobSpec(runtime=Runtime.SHELL, command="true", stop_grace_seconds=job_grace)
    plan = build_plan(spec, Path("/w"), None, ENV, "python3", 60, max_stop_grace_seconds=worker_cap)
    assert plan.stop_grace_seconds == granted


def test_build_plan_for_a_program_runtime_needs_the_program() -> None:
    spec = JobSpec(runtime=Runtime.EXECUTABLE, artifact=SHA)
    with pytest.raises(ValueError, match="needs its artifact"):
        build_plan(spec, Path("/w"), None, ENV, "python3", 60)
