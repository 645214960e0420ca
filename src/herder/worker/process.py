"""An attempt's process: started from its ``LaunchPlan`` (by the sandbox launcher's server, or
wrapped to enter its limits), its output read as it comes, its group signalled, and it reaped.

No child watcher is involved (uvloop may run the loop): the pipes and a pidfd are watched with
``add_reader``, and the process is reaped once its pidfd says it has exited (with ``wait4``, or
by the launcher, whose child it is), which also yields its resource usage.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from herder.domain.jobs import DEFAULT_STOP_GRACE_SECONDS
from herder.worker.launch_server import LaunchServer, Reaped
from herder.worker.limits import Confinement, Limits
from herder.worker.output import MAX_OUTPUT_BYTES_PER_ATTEMPT
from herder.worker.sandbox import Sandbox

READ_CHUNK_BYTES = 64 * 1024
MAX_DRAIN_READS = 64  # a final drain stops even if an escaped process keeps writing

OutputSink = Callable[[str, bytes], None]  # ("stdout" | "stderr", data), called in the loop


@dataclass(frozen=True)
class LaunchPlan:
    """Everything needed to start the process.

    With a ``sandbox`` the job starts through the sandbox launcher and ``cwd`` is a path as
    the job sees it; without, it runs as the worker's own user in ``cwd`` (isolation none),
    started by ``launcher`` (``plain_launcher.py``), so that it dies with the worker; without
    a launcher, or with limits (``confinement.wrap``), by the caller itself (outside a worker).
    """

    argv: list[str]  # argv[0] resolved by PATH in env, or a path
    env: dict[str, str] = field(repr=False)  # the complete environment: secrets too
    cwd: Path
    timeout_seconds: float
    stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS  # SIGTERM, this long, SIGKILL
    limits: Limits | None = None  # None: none beyond the worker's own
    sandbox: Sandbox | None = None
    name: str = ""  # names its cgroup; unique among the worker's running attempts
    launcher: LaunchServer | None = None
    output_limit_bytes: int = MAX_OUTPUT_BYTES_PER_ATTEMPT  # then its stdout and stderr close

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("argv is empty")
        if self.timeout_seconds <= 0 or self.stop_grace_seconds < 0:
            raise ValueError("timeout_seconds must be > 0 and stop_grace_seconds >= 0")

    @property
    def cgroup_name(self) -> str:
        return self.name or self.cwd.name


@dataclass(frozen=True)
class _Child:
    pid: int
    pidfd: int
    stdout: int  # the read ends of its pipes
    stderr: int
    reap: Callable[[], Awaitable[Reaped]]
    reap_later: Callable[[], object]  # reap it, nobody waiting for how it ended


class AttemptProcess:
    """The running process: its pipes and pidfd stay registered with the loop until closed.

    Once it has written more than its output limit, the worker closes its ends of the pipes:
    reading no more, the worker spends nothing on what the job writes next, which fails at
    once (EPIPE, or SIGPIPE, which ends most programs), so the cost stays with the job.
    """

    @classmethod
    async def start(
        cls, plan: LaunchPlan, on_output: OutputSink, confinement: Confinement | None
    ) -> AttemptProcess:
        return cls(await _spawn(plan, confinement), on_output, plan.output_limit_bytes)

    def __init__(self, child: _Child, on_output: OutputSink, output_limit: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._on_output = on_output
        self._output_left = output_limit
        self.output_limited = False
        self.exited: asyncio.Future[None] = self._loop.create_future()
        self.has_exited = False
        self.reaped = False
        self.sink_failed = asyncio.Event()
        self.sink_error: Exception | None = None
        self._output_closed: asyncio.Future[None] = self._loop.create_future()
        self._child = child
        self.pid = self._child.pid
        self._pidfd = self._child.pidfd
        self._streams = {self._child.stdout: "stdout", self._child.stderr: "stderr"}
        for fd in self._streams:
            os.set_blocking(fd, False)
            self._loop.add_reader(fd, self._read, fd)
        self._loop.add_reader(self._pidfd, self._on_exit)

    def signal_group(self, number: int) -> None:
        """Signal the whole group; only before reaping, while the leader pins the group id."""
        if not self.reaped:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, number)

    def kill_group(self) -> None:
        self.signal_group(signal.SIGKILL)

    async def reap(self) -> Reaped:
        """How it ended; call only once the pidfd said the process has exited."""
        self._let_go()
        return await self._child.reap()

    def _reap_later(self) -> None:
        self._let_go()
        self._child.reap_later()

    def _let_go(self) -> None:
        """From here on the group id may be another's: nothing more is signalled."""
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self.reaped = True

    async def finish_output(self, within: float) -> None:
        """Wait briefly for EOF, then take what the pipes hold and stop reading."""
        if self._streams:
            await asyncio.wait({self._output_closed}, timeout=within)
        for fd in list(self._streams):
            for _ in range(MAX_DRAIN_READS):
                if fd not in self._streams or not self._read(fd):
                    break
        self._close_pipes()

    def abandon(self) -> None:
        """Clean up after ``execute`` itself was cancelled or failed; a no-op after a reap."""
        self._close_pipes()
        if self.reaped:
            return
        self.kill_group()
        if self.has_exited:
            self._reap_later()
        else:  # dying from the SIGKILL: reap it when it is gone, without blocking the loop
            self._loop.remove_reader(self._pidfd)
            self._loop.add_reader(self._pidfd, self._reap_later)

    def _read(self, fd: int) -> bool:
        """Read once from ``fd``; return whether there may be more right away."""
        try:
            data = os.read(fd, READ_CHUNK_BYTES)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._close_stream(fd)
            return False
        if self.sink_error is None:
            try:
                self._on_output(self._streams[fd], data)
            except Exception as exc:
                self.sink_error = exc
                self.sink_failed.set()
        self._output_left -= len(data)
        if self._output_left < 0:
            self.output_limited = True
            self._close_pipes()
            return False
        return True

    def _close_stream(self, fd: int) -> None:
        self._loop.remove_reader(fd)
        del self._streams[fd]
        os.close(fd)
        if not self._streams and not self._output_closed.done():
            self._output_closed.set_result(None)

    def _close_pipes(self) -> None:
        for fd in list(self._streams):
            self._close_stream(fd)

    def _on_exit(self) -> None:
        self._loop.remove_reader(self._pidfd)
        self.has_exited = True
        if not self.exited.done():
            self.exited.set_result(None)


async def _spawn(plan: LaunchPlan, confinement: Confinement | None) -> _Child:
    """Started with a pipe for each of stdout and stderr: by the sandbox launcher, which enters
    the limits itself as its last privileged step; or (isolation none) as the worker's user,
    wrapped to enter its limits."""
    stdout, stdout_end = os.pipe2(os.O_CLOEXEC)
    stderr, stderr_end = os.pipe2(os.O_CLOEXEC)
    try:
        if plan.sandbox is not None:
            sandbox = plan.sandbox
            pid, pidfd = await sandbox.start(
                plan.argv, confinement, plan.env, stdout_end, stderr_end
            )
            return _Child(
                pid,
                pidfd,
                stdout,
                stderr,
                lambda: sandbox.reap(pid),
                lambda: sandbox.reap_later(pid),
            )
        if plan.launcher is not None and confinement is None:  # none has no limits of its own
            launcher = plan.launcher
            pid, pidfd = await _start_plain(launcher, plan, stdout_end, stderr_end)
            return _Child(
                pid,
                pidfd,
                stdout,
                stderr,
                lambda: launcher.reap(pid),
                lambda: launcher.reap_later(pid),
            )
        return _spawn_plain(plan, confinement, stdout, stderr, stdout_end, stderr_end)
    except BaseException:
        os.close(stdout)
        os.close(stderr)
        raise
    finally:
        os.close(stdout_end)
        os.close(stderr_end)


async def _start_plain(
    launcher: LaunchServer, plan: LaunchPlan, stdout_end: int, stderr_end: int
) -> tuple[int, int]:
    try:
        options = ["--chdir", str(plan.cwd), "--", *plan.argv]
        return await launcher.start(options, plan.env, stdout_end, stderr_end)
    except OSError as error:  # as a start by the worker itself would say it
        raise OSError(error.errno, f"{error.strerror}: {plan.argv[0]!r}") from error


def _spawn_plain(
    plan: LaunchPlan,
    confinement: Confinement | None,
    stdout: int,
    stderr: int,
    stdout_end: int,
    stderr_end: int,
) -> _Child:
    stdin = confinement.stdin if confinement is not None else None
    process = subprocess.Popen(
        plan.argv if confinement is None else confinement.wrap(plan.argv),
        stdin=subprocess.DEVNULL if stdin is None else stdin,
        stdout=stdout_end,
        stderr=stderr_end,
        cwd=plan.cwd,
        env=plan.env,
        close_fds=True,
        start_new_session=True,
    )
    try:
        pidfd = os.pidfd_open(process.pid)
    except OSError:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()  # brief: SIGKILL was just sent
        raise

    def reap_now() -> Reaped:
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)  # keeps Popen quiet
        return Reaped(status, usage.ru_utime, usage.ru_stime, usage.ru_maxrss)

    async def reap() -> Reaped:
        return reap_now()

    return _Child(process.pid, pidfd, stdout, stderr, reap, reap_now)
