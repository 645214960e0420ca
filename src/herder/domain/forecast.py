"""The demand a pool's schedules foretell, minute by minute (docs/autoscaling.md#forecast).

Pure: schedules come grouped — every schedule of one cron expression, zone, job and pool is
one ``ScheduleGroup`` with a count — so each distinct expression's fire times are worked out
once, whatever the number of schedules sharing it. A fire starts ``count`` runs of the group's
need at its instant, each busy for the group's expected duration. A minute's demand is its
**peak**: the most that is busy at any instant within it, resource by resource — what must
be ready then (500 one-second runs fired at 12:00:00 need 500 slots at 12:00, not the eight
a minute's average would say). A run fired at ``t`` is busy over ``[t, t + duration)``.

Only fires from ``now`` on are foretold. One before it either happened — its runs are real,
running or queued, and counted as such (the autoscaler adds them) — or never will: a schedule
made at 04:07:01 first fires at 04:08, so 04:07:00 is no fire of its.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from herder.domain.cron import CronError, CronExpression, fires_between, parse_timezone
from herder.domain.placement.resources import Amount

MINUTE = timedelta(minutes=1)
MAX_MINUTES = 24 * 60
DEFAULT_DURATION_SECONDS = 60.0  # a job with no recent run: a minute
MAX_FIRES_PER_EXPRESSION = MAX_MINUTES * 60  # a seconds field firing every second for a day
_INSTANT = timedelta(microseconds=1)  # the smallest step of a datetime


@dataclass(frozen=True)
class ScheduleGroup:
    """Schedules alike for the forecast: how many, and what each fire starts."""

    cron: str
    zone: str
    pool: str | None
    need: Amount  # of one run, all its members (slots: its members)
    duration_seconds: float
    count: int


@dataclass
class MinuteDemand:
    """What a pool's schedules start in one minute, and the most they keep busy at once in
    it."""

    at: datetime  # the minute's start, UTC
    runs_starting: int = 0
    busy: Amount = field(default_factory=Amount)  # each resource's peak in it (slots: runs)


@dataclass
class _Fires:
    """Each distinct (expression, zone)'s fire times in the window, found once."""

    start: datetime
    end: datetime
    found: dict[tuple[str, str], list[datetime]] = field(default_factory=dict)

    def of(self, cron: str, zone: str) -> list[datetime]:
        key = (cron, zone)
        if key not in self.found:
            try:
                # stored expressions were checked when saved, seconds allowed or not
                expression = CronExpression.parse(cron, allow_seconds=True)
                fires = fires_between(
                    expression, parse_timezone(zone), self.start, self.end,
                    MAX_FIRES_PER_EXPRESSION,
                )  # fmt: skip
            except (CronError, ValueError):  # a schedule that cannot fire adds nothing
                fires = []
            self.found[key] = fires
        return self.found[key]


def forecast(
    groups: Iterable[ScheduleGroup],
    now: datetime,
    minutes: int,
) -> list[MinuteDemand]:
    """The demand of ``groups``'s fires from ``now`` on, in each of ``minutes`` minutes from
    ``now``'s minute (the first minute only from ``now``)."""
    if not 1 <= minutes <= MAX_MINUTES:
        raise ValueError(f"minutes is {minutes}; 1 to {MAX_MINUTES}")
    first = now.replace(second=0, microsecond=0)
    end = first + minutes * MINUTE
    fires = _Fires(now - _INSTANT, end)  # fires_between's start is exclusive: ``now`` counts
    demand = [MinuteDemand(first + index * MINUTE) for index in range(minutes)]
    changes: list[tuple[datetime, int, Amount]] = []  # (when, 0 ends / 1 starts, amount)
    for group in groups:
        amount = group.need.times(group.count)
        lasts = timedelta(seconds=max(group.duration_seconds, 1.0))
        for fired in fires.of(group.cron, group.zone):
            if fired >= end:
                continue
            demand[int((fired - first) // MINUTE)].runs_starting += group.count
            changes += [(fired, 1, amount), (fired + lasts, 0, amount)]
    _peaks(demand, sorted(changes, key=lambda change: (change[0], change[1])))
    return demand


def _peaks(demand: Sequence[MinuteDemand], changes: Sequence[tuple[datetime, int, Amount]]) -> None:
    """Each minute's busy peak, walking the starts and ends in time order. What is busy at
    the minute's first instant counts, after the ends and starts at that instant (an end
    first: a run ending as another starts never overlaps it)."""
    busy, index = Amount(), 0
    for minute in demand:
        until = minute.at + MINUTE
        while index < len(changes) and changes[index][0] <= minute.at:
            busy = _changed(busy, changes[index])
            index += 1
        peak = busy
        while index < len(changes) and changes[index][0] < until:
            busy = _changed(busy, changes[index])
            peak = _larger(peak, busy)
            index += 1
        minute.busy = peak


def _changed(busy: Amount, change: tuple[datetime, int, Amount]) -> Amount:
    _, starts, amount = change
    return busy + amount if starts else busy - amount


def _larger(one: Amount, other: Amount) -> Amount:
    return Amount(
        max(one.cpu_milli, other.cpu_milli), max(one.memory_mb, other.memory_mb),
        max(one.gpus, other.gpus), max(one.slots, other.slots),
    )  # fmt: skip


def median_seconds(durations: Sequence[float]) -> float:
    """A job's expected run time from its recent runs; ``DEFAULT_DURATION_SECONDS`` when it
    has none."""
    if not durations:
        return DEFAULT_DURATION_SECONDS
    ordered = sorted(durations)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


class ForecastMinute(BaseModel):
    """One minute of ``GET /v1/forecast``."""

    model_config = ConfigDict(frozen=True)

    at: datetime
    runs_starting: int
    cpu: float = Field(description="cores busy at the minute's peak")
    memory_mb: int
    gpus: int
    runs: int = Field(description="runs busy at the minute's peak")

    @classmethod
    def of(cls, minute: MinuteDemand) -> ForecastMinute:
        busy = minute.busy
        return cls(
            at=minute.at, runs_starting=minute.runs_starting, cpu=busy.cpu_milli / 1000,
            memory_mb=busy.memory_mb, gpus=busy.gpus, runs=busy.slots,
        )  # fmt: skip


class Forecast(BaseModel):
    """The demand the schedules foretell (docs/autoscaling.md#forecast)."""

    model_config = ConfigDict(frozen=True)

    pool: str | None = Field(description="the pool asked for; null: every pool")
    minutes: list[ForecastMinute]
