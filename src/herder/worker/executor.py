"""Run one attempt of a job as a real OS process and say how it ended.

The attempt is its own session and process group, so a timeout or a cancel reaches everything
it started at once: SIGTERM, then SIGKILL after a grace period. When the main process exits,
for any reason, what is left of its group is killed. A grandchild that left the group with
``setsid`` is out of reach of that; in a sandbox it dies with the attempt's PID namespace
(``sandbox.c``), it dies here when the attempt has a cgroup (``cgroups.py``), and the caller
sweeps every process of the attempt's uid before the uid is used again (``uids.UidSweeper``).

Who stops an attempt says why through a ``StopRequest``: a cancel and a preemption end the
same way (TERM, grace, KILL) but are reported apart.

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
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from herder.domain.retry import DISK_FULL_REASON_PREFIX, OOM_REASON_PREFIX
from herder.domain.states import AttemptState
from herder.worker.limits import Confinement, Enforcer, Limits, Verdict
from herder.worker.sandbox import Sandbox

if TYPE_CHECKING:
    from resource import struct_rusage

OUTPUT_DRAIN_SECONDS = 0.5  # after the group is killed, how long to wait for the pipes' EOF
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


class StopRequest(asyncio.Event):
    """An event that stops an attempt and says why; the first reason given wins.

    Setting it as a plain event is a cancel.
    """

    def __init__(self) -> None:
        super().__init__()
        self.state = AttemptState.CANCELLED
        self.reason = "cancelled"

    def stop(self, state: AttemptState, reason: str) -> None:
        if not self.is_set():
            self.state, self.reason = state, reason
            self.set()


def _why_stopped(cancel: asyncio.Event) -> tuple[AttemptState, str]:
    if isinstance(cancel, StopRequest):
        return cancel.state, cancel.reason
    return AttemptState.CANCELLED, "cancelled"


@dataclass(frozen=True)
class ResourceUsage:
    """From ``wait4``: the main process plus the descendants it waited for.

    Without a cgroup ``max_rss_kb`` has the worker's own RSS as a floor: Linux counts the
    memory of the process that spawned the child, before its exec. With one it is the
    cgroup's peak: every process of the attempt together, page cache included.
    """

    cpu_user_seconds: float
    cpu_system_seconds: float
    max_rss_kb: int
    wall_seconds: float


@dataclass(frozen=True)
class Outcome:
    state: AttemptState
    exit_code: int | None  # None when killed by a signal or never started
    reason: str
    usage: ResourceUsage


@dataclass(frozen=True)
class _Stop:
    """Why we ended the attempt ourselves, and whether SIGTERM was not enough."""

    state: AttemptState
    reason: str
    escalated: bool


async def execute(
    plan: LaunchPlan, on_output: OutputSink, cancel: asyncio.Event, enforcer: Enforcer | None = None
) -> Outcome:
    """Run ``plan`` to its end; on return nothing of its process group (or of its cgroup) is
    left running. ``plan.limits`` are enforced by ``enforcer`` when both are given.

    An exception raised by ``on_output`` stops the attempt and is re-raised here once the
    process is gone.
    """
    started = time.monotonic()
    if cancel.is_set():
        state, reason = _why_stopped(cancel)
        return _never_ran(state, f"{reason} before it started", started)
    confinement = None
    if enforcer is not None and plan.limits is not None:
        uid = plan.sandbox.uid if plan.sandbox is not None else None
        try:  # a few small writes: cheaper than a thread hop
            confinement = enforcer.confine(
                plan.cgroup_name, plan.limits, gid=uid, by_launcher=plan.sandbox is not None
            )
        except OSError as exc:
            return _never_ran(AttemptState.FAILED, f"could not set its limits: {exc}", started)
    try:
        return await _run(plan, on_output, cancel, confinement, started)
    finally:
        if confinement is not None:  # waits for killed processes to leave: off the loop
            await asyncio.to_thread(confinement.remove)


async def _run(
    plan: LaunchPlan,
    on_output: OutputSink,
    cancel: asyncio.Event,
    confinement: Confinement | None,
    started: float,
) -> Outcome:
    try:
        child = _Child(plan, on_output, confinement)
    except OSError as exc:
        return _never_ran(AttemptState.FAILED, f"could not start: {exc}", started)
    try:
        stop = await _supervise(child, plan, cancel)
        child.kill_group()
        status, rusage = child.reap()
        wall_seconds = time.monotonic() - started
        verdict = confinement.collect() if confinement is not None else Verdict()
        await child.finish_output(OUTPUT_DRAIN_SECONDS)
    finally:
        child.abandon()
    if child.sink_error is not None:
        raise child.sink_error
    peak_kb = (verdict.peak_memory_bytes or 0) // 1024
    usage = ResourceUsage(
        rusage.ru_utime, rusage.ru_stime, peak_kb or rusage.ru_maxrss, wall_seconds
    )
    disk_full = plan.sandbox is not None and plan.sandbox.disk.is_full()
    return _outcome(stop, status, usage, plan, verdict, disk_full=disk_full)


async def _supervise(child: _Child, plan: LaunchPlan, cancel: asyncio.Event) -> _Stop | None:
    """Wait for the exit, a cancel or the timeout; on the latter two, TERM then KILL the group."""
    stoppers: set[asyncio.Future[Any]] = {
        asyncio.ensure_future(cancel.wait()),
        asyncio.ensure_future(child.sink_failed.wait()),
    }
    try:
        await asyncio.wait(
            {child.exited, *stoppers},
            timeout=plan.timeout_seconds,
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        for stopper in stoppers:
            stopper.cancel()
    if child.has_exited:
        return None
    if child.sink_error is not None:
        state, reason = AttemptState.CANCELLED, "output sink failed"
    elif cancel.is_set():
        state, reason = _why_stopped(cancel)
    else:
        state, reason = AttemptState.TIMED_OUT, f"timed out after {plan.timeout_seconds:g}s"
    child.signal_group(signal.SIGTERM)
    await asyncio.wait({child.exited}, timeout=plan.kill_grace_seconds)
    escalated = not child.has_exited
    if escalated:
        child.signal_group(signal.SIGKILL)
        await asyncio.wait({child.exited})
    return _Stop(state, reason, escalated)


def _outcome(
    stop: _Stop | None,
    status: int,
    usage: ResourceUsage,
    plan: LaunchPlan,
    verdict: Verdict,
    *,
    disk_full: bool = False,
) -> Outcome:
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    if stop is not None:
        grace = plan.kill_grace_seconds
        sent = f"SIGTERM, then SIGKILL after {grace:g}s grace" if stop.escalated else "SIGTERM"
        return Outcome(stop.state, exit_code, f"{stop.reason} ({sent})", usage)
    number = os.WTERMSIG(status) if exit_code is None else None
    ended = f"exit {exit_code}" if number is None else f"killed by {_signal_name(number)}"
    memory = plan.limits.memory_text if plan.limits is not None else "its"
    if exit_code == 0:
        if verdict.oom_kills:  # the job survived it, but a user should know it happened
            ended += (
                f"; the kernel killed {_processes(verdict.oom_kills)} at its {memory} memory limit"
            )
        if disk_full:
            ended += f"; {_disk_text(plan)} was full"
        return Outcome(AttemptState.SUCCEEDED, 0, ended, usage)
    if verdict.oom_kills and plan.limits is not None:
        if number == signal.SIGKILL:
            reason = f"the kernel killed it at its {memory} memory limit"
        else:
            reason = f"a process was killed at its {memory} memory limit; {ended}"
        return Outcome(AttemptState.FAILED, exit_code, f"{OOM_REASON_PREFIX}: {reason}", usage)
    if disk_full:
        return Outcome(
            AttemptState.FAILED,
            exit_code,
            f"{DISK_FULL_REASON_PREFIX}: {_disk_text(plan)} was full; {ended}",
            usage,
        )
    if number == signal.SIGKILL and verdict.oom_kills is None:
        ended += " (possibly out of memory)"  # not from us; the cgroup that could tell is absent
    return Outcome(AttemptState.FAILED, exit_code, ended, usage)


def _processes(count: int) -> str:
    return "1 process" if count == 1 else f"{count} processes"


def _disk_text(plan: LaunchPlan) -> str:
    size = plan.sandbox.disk.size_bytes if plan.sandbox is not None else 0
    return f"its {size // (1024 * 1024)} MiB disk"


def not_started(reason: str) -> Outcome:
    """A FAILED outcome for an attempt that never got as far as a process."""
    return Outcome(AttemptState.FAILED, None, reason, ResourceUsage(0.0, 0.0, 0, 0.0))


def _never_ran(state: AttemptState, reason: str, started: float) -> Outcome:
    return Outcome(state, None, reason, ResourceUsage(0.0, 0.0, 0, time.monotonic() - started))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _Child:
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
        start_new_session=True,
    )
