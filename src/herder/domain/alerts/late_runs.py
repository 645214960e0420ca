"""Runs late by their deadline (``deadline_missed``) or by their own history (``running_long``):
one incident per run, keyed by its id, open until that run ends.

``deadline_missed`` is event-driven: the reaper marks a run (or workflow run) missed once;
the rule opens for each it has not judged yet, and resolves when the run ends — a run its
deadline cancelled opens and resolves, so the miss is still told. ``running_long`` compares
a running attempt with the p95 of its job's recent successes, and judges nothing on fewer than
``MIN_SAMPLES`` of them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from herder.domain.alerts.decisions import Signal, percentile
from herder.domain.alerts.rules import RuleParams
from herder.domain.lifecycle.missed import Missed, not_finished_by

MIN_SAMPLES = 5  # successes of a job needed before its runs are judged long
SAMPLES = 50  # its last successes the p95 is taken over


@dataclass(frozen=True)
class MissedDeadline:
    """A run or workflow run marked missed: one not judged yet, or one with an incident open;
    ``ended``: its end state, once it has ended."""

    missed: Missed
    workflow: bool  # a workflow run (of workflow ``missed.name``), else a run of a job
    ended: str | None
    open: bool


def deadline_missed(found: Sequence[MissedDeadline]) -> list[Signal]:
    """Fires for each miss not yet judged (ended already too: its deadline may have cancelled
    it, and the miss is still told) and for an open one still running; an open one clears
    once its run has ended."""
    signals = []
    for one in found:
        missed = one.missed
        run = f"workflow run {missed.id} of workflow" if one.workflow else f"run {missed.id} of job"
        if one.ended is None or not one.open:
            summary = f"{run} {missed.name} missed its deadline: {not_finished_by(missed)}"
            details = {"deadline_at": missed.deadline_at.isoformat(), "cancel": missed.cancel}
            signals.append(Signal(missed.id, True, summary, details))
        else:
            signals.append(Signal(missed.id, False, f"{run} {missed.name} ended {one.ended}"))
    return signals


@dataclass(frozen=True)
class RunningRun:
    id: str
    job_id: str
    job_name: str
    running_seconds: float  # of its current attempt


def running_long(
    running: Sequence[RunningRun],
    successes: Mapping[str, Sequence[float]],
    gone: Collection[str],
    params: RuleParams,
) -> list[Signal]:
    """A run fires once its attempt has run past ``factor`` times the p95 of its job's recent
    successful durations (``successes``, by job) and past ``min_seconds``; an open one clears
    when it no longer runs (``gone``: open keys not running now)."""
    signals = [Signal(run_id, False, f"run {run_id} no longer runs") for run_id in sorted(gone)]
    for run in running:
        samples = successes.get(run.job_id, ())
        if len(samples) < MIN_SAMPLES:
            continue
        p95 = percentile(samples, 0.95)
        if run.running_seconds <= max(params.factor * p95, params.min_seconds):
            continue
        times = run.running_seconds / p95 if p95 > 0 else float("inf")
        summary = (
            f"run {run.id} of job {run.job_name} running {_minutes(run.running_seconds)}, "
            f"{times:.1f}x its p95 of {_minutes(p95)}"
        )
        details = {"running_seconds": round(run.running_seconds, 1),
                   "p95_seconds": round(p95, 3), "samples": len(samples)}  # fmt: skip
        signals.append(Signal(run.id, True, summary, details))
    return signals


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"
