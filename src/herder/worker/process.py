"""An attempt's process: started from its ``LaunchPlan`` (through the sandbox launcher, or
wrapped to enter its limits), its output read as it comes, its group signalled, and it reaped.

No child watcher is involved (uvloop may run the loop): the pipes and a pidfd are watched with
``add_reader``, and the child is reaped with ``wait4`` once its pidfd says it has exited, which
also yields its resource usage.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from herder.worker.limits import Confinement, Limits
from herder.worker.sandbox import Sandbox

if TYPE_CHECKING:
    from resource import struct_rusage

READ_CHUNK_BYTES = 64 * 1024
MAX_DRAIN_READS = 64  # a final drain stops even if an escaped process keeps writing

OutputSink = Callable[[str, bytes], None]  # ("stdout" | "stderr", data), called in the loop


@dataclass(frozen=True)
class LaunchPlan:
    """Everything needed to start the process.

    With a ``sandbox`` the job starts through the sandbox launcher and ``cwd`` is a path as
    the job sees it; without, it runs as the worker's own user in ``cwd`` (isolation none).
    """

    argv: list[str]  # argv[0] resolved by PATH in env, or a path
    env: dict[str, str]  # the complete environment (nothing inherited)
    cwd: Path
    timeout_seconds: float
    kill_grace_seconds: float = 5.0
    limits: Limits | None = None  # None: none beyond the worker's own
    sandbox: Sandbox | None = None
    name: str = ""  # names its cgroup; unique among the worker's running attempts

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("argv is empty")
        if self.timeout_seconds <= 0 or self.kill_grace_seconds < 0:
            raise ValueError("timeout_seconds must be > 0 and kill_grace_seconds >= 0")

    @property
    def cgroup_name(self) -> str:
        return self.name or self.cwd.name


class AttemptProcess:
    """The running process: its pipes and pidfd stay registered with the loop until closed."""

    def __init__(
        self, plan: LaunchPlan, on_output: OutputSink, confinement: Confinement | None
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._on_output = on_output
        self.exited: asyncio.Future[None] = self._loop.create_future()
        self.has_exited = False
        self.reaped = False
        self.sink_failed = asyncio.Event()
        self.sink_error: Exception | None = None
        self._streams: dict[int, str] = {}
        self._output_closed: asyncio.Future[None] = self._loop.create_future()
        self._process = _spawn(plan, confinement)
        self.pid = self._process.pid
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:
            os.killpg(self.pid, signal.SIGKILL)
            self._process.wait()  # brief: SIGKILL was just sent
            self._close_pipes()
            raise
        for name, pipe in (("stdout", self._process.stdout), ("stderr", self._process.stderr)):
            assert pipe is not None
            fd = pipe.fileno()
            os.set_blocking(fd, False)
            self._streams[fd] = name
            self._loop.add_reader(fd, self._read, fd)
        self._loop.add_reader(self._pidfd, self._on_exit)

    def signal_group(self, number: int) -> None:
        """Signal the whole group; only before reaping, while the leader pins the group id."""
        if not self.reaped:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, number)

    def kill_group(self) -> None:
        self.signal_group(signal.SIGKILL)

    def reap(self) -> tuple[int, struct_rusage]:
        """Collect the exit status; call only once the pidfd said the process has exited."""
        _, status, rusage = os.wait4(self.pid, 0)
        self.reaped = True
        self._process.returncode = os.waitstatus_to_exitcode(status)  # keeps Popen quiet
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        return status, rusage

    async def finish_output(self, within: float) -> None:
        """Wait briefly for EOF, then take what the pipes hold and stop reading."""
        if self._streams:
            await asyncio.wait({self._output_closed}, timeout=within)
        for fd in list(self._streams):
            for _ in range(MAX_DRAIN_READS):
                if not self._read(fd):
                    break
        self._close_pipes()

    def abandon(self) -> None:
        """Clean up after ``execute`` itself was cancelled or failed; a no-op after a reap."""
        self._close_pipes()
        if self.reaped:
            return
        self.kill_group()
        if self.has_exited:
            self.reap()
        else:  # dying from the SIGKILL: reap it when it is gone, without blocking the loop
            self._loop.remove_reader(self._pidfd)
            self._loop.add_reader(self._pidfd, self.reap)

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
        return True

    def _close_stream(self, fd: int) -> None:
        self._loop.remove_reader(fd)
        del self._streams[fd]
        if not self._streams and not self._output_closed.done():
            self._output_closed.set_result(None)

    def _close_pipes(self) -> None:
        for fd in list(self._streams):
            self._close_stream(fd)
        for pipe in (self._process.stdout, self._process.stderr):
            if pipe is not None:
                pipe.close()

    def _on_exit(self) -> None:
        self._loop.remove_reader(self._pidfd)
        self.has_exited = True
        if not self.exited.done():
            self.exited.set_result(None)


def _command_line(plan: LaunchPlan, confinement: Confinement | None) -> list[str]:
    """Through the sandbox launcher, which enters the limits itself as its last privileged
    step; or (isolation none) the job as the worker's user, wrapped to enter its limits."""
    if plan.sandbox is not None:
        options = confinement.launcher_options() if confinement is not None else []
        return plan.sandbox.command_line(plan.argv, options)
    if confinement is None:
        return plan.argv
    return confinement.wrap(plan.argv)


def _spawn(plan: LaunchPlan, confinement: Confinement | None) -> subprocess.Popen[bytes]:
    stdin = confinement.stdin if confinement is not None and plan.sandbox is None else None
    return subprocess.Popen(
        _command_line(plan, confinement),
        stdin=subprocess.DEVNULL if stdin is None else stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd="/" if plan.sandbox is not None else plan.cwd,  # the launcher enters the workspace
        env=plan.env,
        close_fds=True,
        pass_fds=(plan.sandbox.disk.fd,) if plan.sandbox is not None else (),
        start_new_session=True,
    )
