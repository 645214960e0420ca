"""A schedule's fires of a workflow under the schedule's concurrency policy: the same rule
as for a job's runs (``lifecycle.concurrency``), over workflow runs — ``allow`` starts every
fire, ``forbid`` skips a fire while a run of the schedule is active, ``replace`` cancels the
active runs for the newest fire."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from herder.domain.lifecycle.concurrency import forbidden
from herder.domain.schedules import ConcurrencyPolicy


@dataclass(frozen=True)
class ScheduledStarts:
    start: tuple[datetime, ...]  # nominal times to start a run for, in order
    # nominal time, and the active run forbidding it (None: the run started in this pass)
    skipped: tuple[tuple[datetime, str | None], ...]
    replaced: tuple[str, ...]  # active runs to cancel


def scheduled_starts(
    policy: ConcurrencyPolicy, active: Sequence[str], nominals: Sequence[datetime]
) -> ScheduledStarts:
    """``active``: the schedule's workflow runs not yet ended, oldest first."""
    if policy is ConcurrencyPolicy.ALLOW or not nominals:
        return ScheduledStarts(tuple(nominals), (), ())
    if policy is ConcurrencyPolicy.REPLACE:
        return ScheduledStarts((nominals[-1],), (), tuple(active))
    if active:
        return ScheduledStarts((), tuple((nominal, active[0]) for nominal in nominals), ())
    first, *rest = nominals
    return ScheduledStarts((first,), tuple((nominal, None) for nominal in rest), ())


def started_now(
    schedule_id: str, policy: ConcurrencyPolicy, active: Sequence[str], now: datetime
) -> ScheduledStarts:
    """A fire asked for by hand, ``now``: as a due one, but refused (409) where ``forbid``
    would skip it."""
    decision = scheduled_starts(policy, active, [now])
    for _, blocking in decision.skipped:
        raise forbidden(schedule_id, blocking or "started just now")
    return decision
