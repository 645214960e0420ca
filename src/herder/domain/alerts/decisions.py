"""What an evaluation of a rule decides: which incidents open, which resolve.

Each kind turns its facts into signals — for a key (a job, a schedule, a loop…), the
condition holds (``firing``) or has cleared — and ``reconcile`` compares them with the
incidents already open. A key already open that still fires opens nothing new: one incident
per episode, however often it is evaluated. A key the facts say nothing about is left as it
is (event-driven kinds only speak of what happened since the last look).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from herder.domain.alerts.rules import RuleKind, RuleParams
from herder.domain.budgets import Standing

QUEUE_KEY = "queue"  # the one key of a tenant-wide condition
# Kinds that read many rows are judged less often than every pass of the evaluator.
EVALUATE_EVERY: dict[RuleKind, timedelta] = {
    RuleKind.QUEUE_WAIT_P99: timedelta(seconds=60),
    RuleKind.RUNNING_LONG: timedelta(seconds=60),
}


def is_due(kind: RuleKind, evaluated_at: datetime | None, now: datetime) -> bool:
    every = EVALUATE_EVERY.get(kind)
    return every is None or evaluated_at is None or now - evaluated_at >= every


@dataclass(frozen=True)
class Signal:
    key: str
    firing: bool  # True: the condition holds; False: it cleared (a recovery)
    summary: str
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Decisions:
    opens: list[Signal]
    resolves: list[Signal]
    still_firing: list[str]  # open keys seen firing again: their ``last_seen_at`` moves


def reconcile(signals: Sequence[Signal], open_keys: Collection[str]) -> Decisions:
    """Open what fires and is not open; resolve what is open and cleared; the last signal
    of a key wins."""
    latest = {signal.key: signal for signal in signals}
    opens = [s for s in latest.values() if s.firing and s.key not in open_keys]
    resolves = [s for s in latest.values() if not s.firing and s.key in open_keys]
    again = [s.key for s in latest.values() if s.firing and s.key in open_keys]
    return Decisions(opens, resolves, again)


@dataclass(frozen=True)
class Ended:
    """One ended run (or workflow run), newest first in a key's list."""

    id: str
    state: str
    finished_at: datetime


def failure_streaks(
    ended_by_key: Mapping[str, Sequence[Ended]],
    failures: Collection[str],
    names: Mapping[str, str],
    *,
    consecutive: int,
    noun: str,
) -> list[Signal]:
    """A key fires when its last ``consecutive`` ends all failed; it clears when its last end
    succeeded. Ends that are neither (cancelled, expired…) were left out by the reader. The
    summary calls the key by its name in ``names`` (by its id when it has none: deleted)."""
    signals = []
    for key, ended in ended_by_key.items():
        if not ended:
            continue
        latest = ended[0]
        streak = ended[:consecutive]
        named = f"{noun} {names.get(key, key)}"
        if latest.state not in failures:
            summary = f"{named} recovered: {latest.id} {latest.state}"
            signals.append(Signal(key, False, summary, {"run_id": latest.id}))
        elif len(streak) == consecutive and all(end.state in failures for end in streak):
            last = f"{latest.id} {latest.state}"
            summary = (
                f"{named} failed {consecutive} times in a row (last: {last})"
                if consecutive > 1
                else f"{named} failed ({last})"
            )
            details = {"run_ids": [end.id for end in streak], "state": latest.state}
            signals.append(Signal(key, True, summary, details))
    return signals


def run_failed(
    ended_by_job: Mapping[str, Sequence[Ended]], params: RuleParams, names: Mapping[str, str]
) -> list[Signal]:
    failures = {outcome.value for outcome in params.outcomes}
    return failure_streaks(
        ended_by_job, failures, names, consecutive=params.consecutive, noun="job"
    )


def workflow_failed(
    ended_by_workflow: Mapping[str, Sequence[Ended]], names: Mapping[str, str]
) -> list[Signal]:
    return failure_streaks(ended_by_workflow, {"failed"}, names, consecutive=1, noun="workflow")


@dataclass(frozen=True)
class ScheduleMisses:
    schedule_id: str
    new_misses: int  # missed or skipped fires recorded since the last evaluation
    last_missed_for: datetime | None  # the latest nominal time missed or skipped
    last_fired_for: datetime | None
    open_since: datetime | None  # when its open incident opened; None when none is open


def schedule_missed(schedules: Sequence[ScheduleMisses], names: Mapping[str, str]) -> list[Signal]:
    """New misses fire; with none new, a fire for a nominal time after the incident opened
    (the schedule firing on time again) clears it. The catch-up fire of the pass that
    recorded the misses does not: its nominal time is before the incident. A schedule is
    called by its name in ``names``, by its id when it has none."""
    signals = []
    for one in schedules:
        named = f"schedule {names.get(one.schedule_id, one.schedule_id)}"
        if one.new_misses:
            summary = f"{named} missed or skipped {one.new_misses} fire(s)"
            details = {"missed": one.new_misses, "last_missed_for": _iso(one.last_missed_for)}
            signals.append(Signal(one.schedule_id, True, summary, details))
        elif (
            one.open_since is not None
            and one.last_fired_for is not None
            and one.last_fired_for > one.open_since
        ):
            summary = f"{named} fired on time again"
            signals.append(Signal(one.schedule_id, False, summary))
    return signals


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``values`` need not be sorted; not empty)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def queue_wait_p99(waits_seconds: Sequence[float], params: RuleParams) -> list[Signal]:
    threshold = params.threshold_seconds or 0.0
    if not waits_seconds:
        return [Signal(QUEUE_KEY, False, "no run started in the window")]
    p99 = percentile(waits_seconds, 0.99)
    details = {"p99_seconds": round(p99, 3), "runs": len(waits_seconds),
               "threshold_seconds": threshold}  # fmt: skip
    above = p99 > threshold
    word = "above" if above else "back under"
    summary = f"queue wait p99 {p99:.1f}s is {word} {threshold:g}s ({len(waits_seconds)} runs)"
    return [Signal(QUEUE_KEY, above, summary, details)]


def no_capacity(waiting_run_ids: Sequence[str], params: RuleParams) -> list[Signal]:
    """Runs queued at least ``wait_seconds`` that the dispatcher found no room for."""
    if not waiting_run_ids:
        return [Signal(QUEUE_KEY, False, "no run waits for capacity")]
    summary = (
        f"{len(waiting_run_ids)} run(s) waited over {params.wait_seconds:g}s with no capacity free"
    )
    return [Signal(QUEUE_KEY, True, summary, {"run_ids": list(waiting_run_ids[:20])})]


def loop_stale(
    lease_expiries: Mapping[str, datetime], params: RuleParams, now: datetime
) -> list[Signal]:
    """A loop whose lease expired ``stale_seconds`` ago runs nowhere: nobody renews it."""
    limit = timedelta(seconds=params.stale_seconds)
    signals = []
    for name, expires_at in sorted(lease_expiries.items()):
        if params.loop is not None and name != params.loop:
            continue
        stale = now - expires_at > limit
        summary = (
            f"control loop {name} has not run since {expires_at:%Y-%m-%d %H:%M:%S} UTC"
            if stale else f"control loop {name} runs again"
        )  # fmt: skip
        signals.append(Signal(name, stale, summary, {"lease_expires_at": _iso(expires_at)}))
    return signals


def budget(standings: Sequence[Standing], params: RuleParams) -> list[Signal]:
    """Two keys per budget: its ``fraction`` used (a warning) and spent. Each clears when
    its use is back under (a new period begins, or the budget is raised)."""
    signals = []
    for standing in standings:
        budget, used = standing.budget, standing.used
        name = f"{budget.period}:{budget.pool or '*'}"
        details = {
            "period": str(budget.period), "pool": budget.pool, "hard": budget.hard,
            "cpu_seconds_used": round(used.cpu_seconds, 3), "cpu_seconds": budget.cpu_seconds,
            "gpu_seconds_used": round(used.gpu_seconds, 3), "gpu_seconds": budget.gpu_seconds,
            "resets_at": _iso(standing.window.ends_at),
        }  # fmt: skip
        percent = f"{standing.fraction:.0%}"
        for key, reached in (
            (f"{name}:{params.fraction:g}", standing.fraction >= params.fraction),
            (f"{name}:spent", standing.spent),
        ):
            state = "reached" if reached else "is back under"
            summary = f"{budget.name} {state} {key.rsplit(':', 1)[1]} ({percent} used)"
            signals.append(Signal(key, reached, summary, details))
    return signals


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
