"""How an attempt ended, in words a user reads: the state, the exit code or signal, and why
(a stop we sent, the memory limit, a full disk), with what it used.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from pydantic import JsonValue

from herder.domain.artifacts import human_size
from herder.domain.retry import DISK_FULL_REASON_PREFIX, OOM_REASON_PREFIX
from herder.domain.states import AttemptState, StoppedBy
from herder.worker.limits import Verdict
from herder.worker.process import LaunchPlan


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
    output: JsonValue = None  # what the job wrote to $HERDER_OUTPUT, when it succeeded
    stopped_by: StoppedBy | None = None  # None: it ended by itself
    checkpoint_refused: str | None = None  # why its checkpoint was not saved at its end
    # every process it ran was born in its cgroup, and none was left there when it ended:
    # nothing of it runs anywhere, and its uid needs no sweep (``uids.UidSweeper``)
    contained: bool = False


@dataclass(frozen=True)
class Stopped:
    """Why we ended the attempt ourselves, and whether SIGTERM was not enough."""

    state: AttemptState
    reason: str
    escalated: bool


def outcome_of(
    stop: Stopped | None,
    status: int,
    usage: ResourceUsage,
    plan: LaunchPlan,
    verdict: Verdict,
    *,
    disk_full: bool = False,
    output_limited: bool = False,
) -> Outcome:
    """``output_limited``: it wrote past ``plan.output_limit_bytes``, and its output was
    closed there (``process.AttemptProcess``)."""
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    if stop is not None:
        stopped_by = StoppedBy.SIGKILL if stop.escalated else StoppedBy.SIGTERM
        reason = f"{stop.reason} ({_signals_sent(stopped_by, plan.stop_grace_seconds)})"
        return Outcome(stop.state, exit_code, reason, usage, stopped_by=stopped_by)
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
        if output_limited:
            ended += f"; {_output_limit_text(plan)}"
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
    if output_limited:
        return Outcome(
            AttemptState.FAILED, exit_code, f"{_output_limit_text(plan)}; {ended}", usage
        )
    if number == signal.SIGKILL and verdict.oom_kills is None:
        ended += " (possibly out of memory)"  # not from us; the cgroup that could tell is absent
    return Outcome(AttemptState.FAILED, exit_code, ended, usage)


def _signals_sent(stopped_by: StoppedBy, grace_seconds: float) -> str:
    if stopped_by is StoppedBy.SIGTERM:
        return "SIGTERM"
    if grace_seconds == 0:
        return "SIGKILL, no stop grace"
    return f"SIGTERM, then SIGKILL after {grace_seconds:g}s grace"


def _output_limit_text(plan: LaunchPlan) -> str:
    return (
        f"output limit: it wrote more than {human_size(plan.output_limit_bytes)}, "
        "and its stdout and stderr were closed there"
    )


def _processes(count: int) -> str:
    return "1 process" if count == 1 else f"{count} processes"


def _disk_text(plan: LaunchPlan) -> str:
    size = plan.sandbox.disk.size_bytes if plan.sandbox is not None else 0
    return f"its {size // (1024 * 1024)} MiB disk"


def not_started(reason: str, state: AttemptState = AttemptState.FAILED) -> Outcome:
    """An outcome (FAILED, unless stopped) for an attempt that never got as far as a
    process."""
    return Outcome(state, None, reason, ResourceUsage(0.0, 0.0, 0, 0.0))


def never_ran(state: AttemptState, reason: str, started: float) -> Outcome:
    return Outcome(state, None, reason, ResourceUsage(0.0, 0.0, 0, time.monotonic() - started))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
