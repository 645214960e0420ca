"""Run one attempt of a job as a real OS process and say how it ended.

The attempt is its own session and process group, so a timeout or a cancel reaches everything
it started at once: SIGTERM, then SIGKILL after the job's stop grace (``stop_grace_seconds``,
at most the worker's ``--max-stop-grace``). When the main process exits, for any reason,
what is left of its group is killed. A grandchild that left the group with
``setsid`` is out of reach of that; in a sandbox it dies with the attempt's PID namespace
(``sandbox.c``), it dies here when the attempt has a cgroup (``cgroups.py``), and the caller
sweeps every process of the attempt's uid before the uid is used again (``uids.UidSweeper``).

Who stops an attempt says why through a ``StopRequest``: a cancel and a preemption end the
same way (TERM, grace, KILL) but are reported apart.

The process itself (its launch, pipes and reaping) is ``process.py``'s; the words of how it
ended are ``outcome.py``'s.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from herder.domain.states import AttemptState
from herder.worker.limits import Confinement, Enforcer, Verdict
from herder.worker.outcome import Outcome, ResourceUsage, Stopped, never_ran, outcome_of
from herder.worker.process import AttemptProcess, LaunchPlan, OutputSink

OUTPUT_DRAIN_SECONDS = 0.5  # after the group is killed, how long to wait for the pipes' EOF

# What readies the workspace inside the attempt's limits (given them), before the job: why the
# attempt cannot start, or None.
Preparation = Callable[[Confinement | None], Awaitable[str | None]]
# What the worker runs in the attempt's limits beside the job (a checkpoint save) finishing,
# once the job's processes are gone and before what is left in its limits is killed.
Settling = Callable[[], Awaitable[None]]
# What follows, still inside its limits (its checkpoint saved): the outcome, amended.
Conclusion = Callable[[Outcome], Awaitable[Outcome]]


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


async def execute(
    plan: LaunchPlan,
    on_output: OutputSink,
    cancel: asyncio.Event,
    enforcer: Enforcer | None = None,
    prepare: Preparation | None = None,
    settle: Settling | None = None,
    conclude: Conclusion | None = None,
) -> Outcome:
    """Run ``plan`` to its end; on return nothing of its process group is left running, and
    whatever was left in its cgroup has been killed (the cgroup goes once that is gone: here,
    or in ``cgroup_pool.py``'s thread). ``plan.limits`` are enforced by ``enforcer`` when both
    are given, from ``prepare`` on (an archive is unpacked there, charged to the attempt) to
    ``conclude`` (called once the job ran, even if it could not start, after ``settle``).

    An exception raised by ``on_output`` stops the attempt and is re-raised here once the
    process is gone.
    """
    started = time.monotonic()
    if cancel.is_set():
        state, reason = _why_stopped(cancel)
        return never_ran(state, f"{reason} before it started", started)
    confinement = None
    if enforcer is not None and plan.limits is not None:
        uid = plan.sandbox.uid if plan.sandbox is not None else None
        try:  # a cgroup made ahead and a few small writes: cheaper than a thread hop
            confinement = enforcer.confine(
                plan.cgroup_name, plan.limits, gid=uid, by_launcher=plan.sandbox is not None
            )
        except OSError as exc:
            return never_ran(AttemptState.FAILED, f"could not set its limits: {exc}", started)
    try:
        refused = await prepare(confinement) if prepare is not None else None
        if refused is not None:
            return never_ran(AttemptState.FAILED, refused, started)
        if cancel.is_set():
            state, reason = _why_stopped(cancel)
            return never_ran(state, f"{reason} before it started", started)
        outcome = await _run(plan, on_output, cancel, confinement, started, settle)
        return await conclude(outcome) if conclude is not None else outcome
    finally:
        if confinement is not None and not confinement.try_remove():  # or handed to the pool
            await asyncio.to_thread(confinement.remove)  # waits for what is left: off the loop


async def _run(
    plan: LaunchPlan,
    on_output: OutputSink,
    cancel: asyncio.Event,
    confinement: Confinement | None,
    started: float,
    settle: Settling | None,
) -> Outcome:
    try:
        child = await AttemptProcess.start(plan, on_output, confinement)
    except OSError as exc:
        if settle is not None:
            await settle()
        return never_ran(AttemptState.FAILED, f"could not start: {exc}", started)
    try:
        stop = await _supervise(child, plan, cancel)
        child.kill_group()
        reaped = await child.reap()
        wall_seconds = time.monotonic() - started
        if settle is not None:
            await settle()
        verdict = confinement.collect() if confinement is not None else Verdict()
        await child.finish_output(OUTPUT_DRAIN_SECONDS)
    finally:
        child.abandon()
    if child.sink_error is not None:
        raise child.sink_error
    peak_kb = (verdict.peak_memory_bytes or 0) // 1024
    # the cgroup's account where there is one: wait4 misses what the attempt left unwaited
    user, system = verdict.cpu_seconds or (reaped.user_seconds, reaped.system_seconds)
    usage = ResourceUsage(user, system, peak_kb or reaped.max_rss_kb, wall_seconds)
    disk_full = plan.sandbox is not None and plan.sandbox.disk.is_full()
    outcome = outcome_of(
        stop,
        reaped.status,
        usage,
        plan,
        verdict,
        disk_full=disk_full,
        output_limited=child.output_limited,
    )
    return replace(outcome, contained=verdict.left_running == 0)


async def _supervise(
    child: AttemptProcess, plan: LaunchPlan, cancel: asyncio.Event
) -> Stopped | None:
    """Wait for the exit, a cancel or the timeout; on the latter two, TERM then KILL the group
    (KILL at once with no stop grace)."""
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
    if plan.stop_grace_seconds > 0:
        child.signal_group(signal.SIGTERM)
        await asyncio.wait({child.exited}, timeout=plan.stop_grace_seconds)
    escalated = plan.stop_grace_seconds == 0 or not child.has_exited
    if escalated:
        child.signal_group(signal.SIGKILL)
        await asyncio.wait({child.exited})
    return Stopped(state, reason, escalated)
