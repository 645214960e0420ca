"""What the overview shows of a recent window: runs ended per minute by outcome, and the
share that failed. Pure: the store counts, this shapes the counts into a chart's series."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum

from herder.domain.models import _Record
from herder.domain.states import FAILED_RUN_STATES, RunState

MAX_MINUTES = 1440  # a day of per-minute buckets at most


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


# A run that ran and did not succeed counts as failed whatever ended it; a workflow task
# that never ran (skipped, upstream_failed) is no outcome of the fleet's work.
OUTCOME_OF_STATE: dict[RunState, Outcome] = {
    RunState.SUCCEEDED: Outcome.SUCCEEDED,
    **dict.fromkeys(FAILED_RUN_STATES, Outcome.FAILED),
    RunState.CANCELLED: Outcome.CANCELLED,
}


class MinuteOutcomes(_Record):
    minute: datetime  # the minute's start, UTC
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0


class ResourceTotals(_Record):
    cpu: float
    memory_mb: float
    gpus: float
    slots: float


class Stats(_Record):
    """The overview: the tenant's own (``scope`` tenant) or the whole fleet's (a system
    admin's ``fleet``). Capacity and workers are the fleet's, shown only to the fleet scope."""

    scope: str
    at: datetime
    minutes: int
    runs: dict[str, int]  # runs in each live state (LIVE_RUN_STATES), in the enum's order
    awaiting_approval: int = 0  # approval tasks waiting for a person's decision
    throughput: list[MinuteOutcomes]  # one per minute of the window, oldest first
    ended: dict[str, int]  # outcome → runs ended in the window
    failure_rate: float | None  # failed / (succeeded + failed); None when none ended
    resources: dict[str, ResourceTotals | None]  # used, and capacity (None for a tenant)
    workers: dict[str, int] | None  # workers by state (None for a tenant)


def window_start(now: datetime, minutes: int) -> datetime:
    """The first minute of a window of ``minutes`` whole minutes ending with ``now``'s."""
    return now.replace(second=0, microsecond=0) - timedelta(minutes=minutes - 1)


def throughput(
    ended: Mapping[tuple[datetime, RunState], int], start: datetime, minutes: int
) -> list[MinuteOutcomes]:
    """Per-minute outcomes from counts by (minute, end state); minutes with none are zeros."""
    buckets = {start + timedelta(minutes=i): dict.fromkeys(Outcome, 0) for i in range(minutes)}
    for (minute, state), count in ended.items():
        outcome = OUTCOME_OF_STATE.get(state)
        if outcome is not None and minute in buckets:
            buckets[minute][outcome] += count
    return [
        MinuteOutcomes(minute=minute, **{str(k): v for k, v in counts.items()})
        for minute, counts in buckets.items()
    ]


def totals(series: list[MinuteOutcomes]) -> dict[str, int]:
    return {str(outcome): sum(getattr(minute, outcome) for minute in series) for outcome in Outcome}


def failure_rate(ended: Mapping[str, int]) -> float | None:
    ran = ended[Outcome.SUCCEEDED] + ended[Outcome.FAILED]
    return ended[Outcome.FAILED] / ran if ran else None
