"""An attempt dies with the launcher's server that started it, and the server with the end of
the worker's socket: at isolation none (``plain_launcher.py``) and in the sandbox
(``sandbox.c``). At isolation none what an attempt started also ends with the attempt, and is
charged to it (all of it where its keeper has a CPU account). Killing the worker itself is
``tests/system/test_worker_death.py``."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.domain.states import AttemptState
from herder.worker import cgroupfs
from herder.worker.cgroups import CgroupsUnavailable, cpu_accounts
from herder.worker.executor import StopRequest, execute
from herder.worker.host import AttemptHost
from herder.worker.isolation import Isolation
from herder.worker.launch_server import LaunchServer
from herder.worker.outcome import Outcome
from herder.worker.process import LaunchPlan, OutputSink
from herder.worker.workspace import memory_workspace_root, workspace_root
from tests.sandboxes import attempt_sandbox, launcher, needs_root
from tests.system.conftest import alive, kill_matching, processes_matching

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
SANDBOX_UID = 190004


def gone(pids: set[int], within: float = 2.0) -> bool:
    """Whether ``pids`` have all died within ``within`` seconds (killed ones take a moment)."""
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def marker() -> Iterator[str]:
    """A ``sleep`` command line no other test shares; whatever of it is left dies after."""
    sleep = f"sleep 60.{uuid.uuid4().int % 10**6:06d}"
    yield sleep
    kill_matching(sleep)


def daemonizing(sleep: str) -> list[str]:
    """A job that leaves a daemon of its own session (a double fork), then waits."""
    return ["sh", "-c", f"setsid sh -c '{sleep} & wait' & {sleep} & wait"]


def started(marker: str, how_many: int = 4) -> set[int]:
    """The job's processes once all are there: its shell and sleep, the daemon's."""
    deadline = time.monotonic() + 10
    while len(found := {pid for pid in processes_matching(marker) if alive(pid)}) < how_many:
        assert time.monotonic() < deadline, found
        time.sleep(0.01)
    return found


async def start(server: LaunchServer, options: list[str], env: dict[str, str]) -> None:
    with open(os.devnull, "wb") as null:
        _, pidfd = await server.start(options, env, null.fileno(), null.fileno())
    os.close(pidfd)


@pytest.mark.parametrize("how", ["closed", "killed"])
def test_an_attempt_at_isolation_none_dies_with_its_launcher(
    tmp_path: Path, marker: str, how: str
) -> None:
    """Closed: as the kernel closes the socket of a worker that died, however it died;
    killed: the server itself died (its attempt's keeper reads the end of its channel)."""
    server = LaunchServer.plain()
    try:
        asyncio.run(start(server, ["--chdir", str(tmp_path), "--", *daemonizing(marker)], ENV))
        processes = started(marker)
        if how == "closed":
            server.close()
        else:
            assert server.pid is not None
            os.kill(server.pid, signal.SIGKILL)
        assert gone(processes), [pid for pid in processes if alive(pid)]
    finally:
        server.close()


# Leaves a daemon (a session of its own, its parent gone) that spins, and says its pid; once
# the daemon has used half a CPU-second, says so and ends, or (argv[1] "waits") waits.
BURNING_DAEMON = """
import os, sys, time
ready, tell = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(tell, str(os.getpid()).encode())
        while True:
            pass
    os._exit(0)
os.close(tell)
daemon = int(os.read(ready, 32))
os.wait()
print(daemon, flush=True)
while sum(map(int, open(f"/proc/{daemon}/stat").read().rsplit(")", 1)[1].split()[11:13])) < (
    os.sysconf("SC_CLK_TCK") / 2
):
    time.sleep(0.01)
print("burnt", flush=True)
if sys.argv[1] == "waits":
    time.sleep(600)
"""


@pytest.mark.parametrize("then", ["ends", "waits"])
def test_a_daemon_an_attempt_at_isolation_none_left_dies_with_it_and_is_charged_to_it(
    tmp_path: Path, then: str
) -> None:
    """Ends: the daemon dies when the attempt's first process has exited; waits: when the
    attempt is cancelled. Either way its CPU is the attempt's, and not the next one's."""

    async def go() -> tuple[Outcome, int, bool, Outcome]:
        server = LaunchServer.plain()
        out = bytearray()
        stop = StopRequest()

        def on_output(_: str, data: bytes) -> None:
            out.extend(data)
            if b"burnt" in out and then == "waits":
                stop.stop(AttemptState.CANCELLED, "cancelled")

        argv = [sys.executable, "-c", BURNING_DAEMON, then]
        plan = LaunchPlan(argv, ENV, tmp_path, 120, launcher=server)
        try:
            outcome = await execute(plan, on_output, stop)
            daemon = int(out.split()[0])
            daemon_gone = gone({daemon})  # before the server ends, which would kill it too
            following = LaunchPlan(["true"], ENV, tmp_path, 30, launcher=server)
            next_outcome = await execute(following, lambda _, __: None, StopRequest())
        finally:
            server.close()
        return outcome, daemon, daemon_gone, next_outcome

    outcome, daemon, daemon_gone, next_outcome = asyncio.run(go())
    assert daemon_gone, f"the daemon {daemon} outlived its attempt"
    expected = AttemptState.SUCCEEDED if then == "ends" else AttemptState.CANCELLED
    assert outcome.state is expected, outcome.reason
    charged = outcome.usage.cpu_user_seconds + outcome.usage.cpu_system_seconds
    assert charged >= 0.45  # the daemon's half CPU-second at least, less the clock's ticks
    assert next_outcome.state is AttemptState.SUCCEEDED
    assert next_outcome.usage.cpu_user_seconds + next_outcome.usage.cpu_system_seconds < 0.2


# A parent that ignores SIGCHLD: the kernel reaps its child, whose CPU no wait4 ever sees. The
# child burns half a CPU-second and ends; the parent waits until it is gone (its pid freed).
UNWAITED_CHILD = """
import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
child = os.fork()
if child == 0:
    while sum(os.times()[:2]) < 0.5:
        pass
    os._exit(0)
while os.path.exists(f"/proc/{child}"):
    time.sleep(0.01)
"""


@pytest.fixture(params=[1, 2])
def accounts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A parent cgroup for the keepers' CPU accounts, as a root worker makes it on a host
    with only this cgroup version mounted; removed after."""
    proc = tmp_path / "proc"
    proc.mkdir()
    version = {1: "cgroup", 2: "cgroup2"}[request.param]
    mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
    mine = [line for line in mountinfo if line.partition(" - ")[2].startswith(f"{version} ")]
    (proc / "mountinfo").write_text("".join(f"{line}\n" for line in mine))
    (proc / "cgroup").write_text(Path("/proc/self/cgroup").read_text())
    try:
        parent = cpu_accounts(f"herder-test-{uuid.uuid4().hex[:12]}", proc)
    except CgroupsUnavailable as error:
        pytest.skip(str(error))
    yield parent
    cgroupfs.remove(parent)


def test_with_cpu_accounts_an_attempt_at_isolation_none_is_charged_what_nobody_waited_for(
    tmp_path: Path, accounts: Path
) -> None:
    async def go() -> Outcome:
        server = LaunchServer.plain(accounts)
        argv = [sys.executable, "-c", UNWAITED_CHILD]
        plan = LaunchPlan(argv, ENV, tmp_path, 60, launcher=server)
        try:
            return await execute(plan, lambda _, __: None, StopRequest())
        finally:
            server.close()

    outcome = asyncio.run(go())
    assert outcome.state is AttemptState.SUCCEEDED, outcome.reason
    assert outcome.usage.cpu_user_seconds + outcome.usage.cpu_system_seconds >= 0.5
    assert not accounts.exists()  # each keeper's went, and then their parent, with the server


def test_the_plain_launcher_runs_a_job_as_the_worker_would(tmp_path: Path) -> None:
    async def go() -> tuple[Outcome, Outcome, bytes]:
        server = LaunchServer.plain()
        out = bytearray()
        command = "echo $FOO; pwd; cat; ls /proc/self/fd; grep SigIgn /proc/self/status; exit 3"
        env = {**ENV, "FOO": "bar"}
        plan = LaunchPlan(["sh", "-c", command], env, tmp_path, 30, launcher=server)
        missing = LaunchPlan(["no-such-program"], ENV, tmp_path, 30, launcher=server)
        try:
            outcome = await execute(plan, lambda _, data: out.extend(data), StopRequest())
            unstarted = await execute(missing, lambda _, __: None, StopRequest())
        finally:
            server.close()
        return outcome, unstarted, bytes(out)

    outcome, unstarted, out = asyncio.run(go())
    assert outcome.exit_code == 3
    # stdin: /dev/null; no descriptor but its own (3: ls reading the directory); SIGPIPE and
    # SIGXFSZ not ignored (as by the launcher's Python)
    *said, ignored = out.decode().splitlines()
    assert said == ["bar", str(tmp_path), "0", "1", "2", "3"]
    mask = int(ignored.split()[1], 16)
    assert not [number for number in (signal.SIGPIPE, signal.SIGXFSZ) if mask & 1 << number - 1]
    assert unstarted.reason.startswith("could not start: ")
    assert "no-such-program" in unstarted.reason


@needs_root
@pytest.mark.parametrize("how", ["closed", "killed"])
def test_a_sandboxed_attempt_dies_with_its_launcher(
    tmp_path_factory: pytest.TempPathFactory, marker: str, how: str
) -> None:
    """Closed: the worker died; killed: the server itself did (each init's parent-death
    signal takes its PID namespace)."""
    shared = launcher(tmp_path_factory)
    server = LaunchServer(shared.command, shared.name)  # its own: this test ends it
    try:
        with attempt_sandbox(server, SANDBOX_UID) as sandbox:

            async def go() -> None:
                with open(os.devnull, "wb") as null:
                    _, pidfd = await sandbox.start(
                        daemonizing(marker), None, ENV, null.fileno(), null.fileno()
                    )
                os.close(pidfd)

            asyncio.run(go())
            processes = started(marker)
            if how == "closed":
                server.close()
            else:
                assert server.pid is not None
                os.kill(server.pid, signal.SIGKILL)
            assert gone(processes), [pid for pid in processes if alive(pid)]
    finally:
        server.close()


@pytest.mark.parametrize("kept_in", ["memory", "state"])
def test_a_worker_started_on_the_home_of_one_that_died_says_what_it_found(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kept_in: str
) -> None:
    """Workspaces live on the host's memory file system; older versions kept them under the
    worker's state directory: leftovers in either are found."""

    def host() -> AttemptHost:
        return AttemptHost(
            tmp_path / "home", Isolation.NONE, uid_base=63000, uid_count=8, server_url="http://x"
        )

    first = host()
    state = first.state
    asyncio.run(first.close())
    root = memory_workspace_root(state) if kept_in == "memory" else state / "attempts"
    root.mkdir(mode=0o700, exist_ok=True)
    (root / "att_left").mkdir(mode=0o700)  # as a killed worker leaves it
    caplog.set_level(logging.WARNING, "herder.worker")
    second = host()
    asyncio.run(second.close())
    assert not (root / "att_left").exists()
    assert "left 1 attempt workspace(s), removed (att_left)" in caplog.text
    assert not memory_workspace_root(state).exists()  # an empty one goes with its worker


@pytest.mark.parametrize("planted", ["another user's directory", "a symlink"])
def test_a_memory_root_someone_planted_is_not_used_and_workspaces_go_on_disk(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, planted: str
) -> None:
    """/dev/shm is everyone's: a name planted there before the worker started would hand its
    maker the attempts' files. The worker refuses it, says so, and works on its own disk."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    root = memory_workspace_root(state)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if planted == "a symlink":
        root.symlink_to(elsewhere)
    else:
        if os.geteuid() != 0:
            pytest.skip("only root can make a directory another user owns")
        root.mkdir(mode=0o777)
        os.chown(root, 65534, 65534)
    try:
        caplog.set_level(logging.WARNING, "herder.worker")
        assert workspace_root(state) == state / "attempts"
        assert "attempt workspaces go on disk" in caplog.text
        assert list(elsewhere.iterdir()) == []
    finally:
        root.unlink() if root.is_symlink() else root.rmdir()


def test_a_job_that_kills_its_keeper_fails_and_the_next_attempt_runs(tmp_path: Path) -> None:
    """At isolation none a job may kill its keeper (it runs as the worker's user): its attempt
    cannot be reaped, as when the launcher died — or, killed before the keeper answered the
    start, it could not start — and the next one gets a new keeper."""

    async def go() -> tuple[Outcome | OSError, Outcome]:
        server = LaunchServer.plain()
        killer = LaunchPlan(["sh", "-c", "kill -9 $PPID"], ENV, tmp_path, 30, launcher=server)
        following = LaunchPlan(["sh", "-c", "exit 7"], ENV, tmp_path, 30, launcher=server)
        try:
            killed: Outcome | OSError
            try:
                killed = await execute(killer, lambda _, __: None, StopRequest())
            except OSError as error:
                killed = error
            return killed, await execute(following, lambda _, __: None, StopRequest())
        finally:
            server.close()

    killed, following = asyncio.run(go())
    if isinstance(killed, OSError):
        assert "Broken pipe" in str(killed)
    else:
        assert killed.state is AttemptState.FAILED
        assert "could not start" in killed.reason
    assert following.exit_code == 7


# Without, the worker blocked sending and the launcher answering, for ever: a thread ends it
# (a signal's exception ends the asking task, and the loop runs the next ask into the block)
@pytest.mark.timeout(60, method="thread")
def test_hundreds_of_asks_at_once_never_block_the_worker_on_its_launcher(tmp_path: Path) -> None:
    """The launcher writes its answers blocking, and stops reading while the worker does not
    read them. Asked in one turn of the loop far more than the socket holds, the worker keeps
    what it cannot take and sends it as it can, reading the answers meanwhile; the jobs asked
    for behind all that still get their descriptors and run."""
    never_started = 1

    def into(output: bytearray) -> OutputSink:
        return lambda _, data: output.extend(data)

    async def go() -> list[object]:
        server = LaunchServer.plain()
        plan = LaunchPlan(["sh", "-c", "echo hi; exit 5"], ENV, tmp_path, 30, launcher=server)
        try:
            refused = [server.reap(never_started) for _ in range(2000)]
            jobs = [execute(plan, into(output), StopRequest()) for output in outputs]
            return await asyncio.gather(*refused, *jobs, return_exceptions=True)
        finally:
            server.close()

    outputs = [bytearray() for _ in range(3)]
    *refusals, first, second, third = asyncio.run(go())
    assert {getattr(refusal, "errno", refusal) for refusal in refusals} == {errno.ECHILD}
    for outcome in (first, second, third):
        assert isinstance(outcome, Outcome)
        assert outcome.exit_code == 5, outcome.reason
    assert outputs == [bytearray(b"hi\n")] * 3
