"""Deadlines: a run (or workflow run) must have finished within a duration of its nominal
time — a schedule fire's, counted on the schedule's local wall clock — or of its submission.
The instant is fixed when the run is made; the reaper raises ``deadline_missed`` past it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Annotated
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field

from herder.domain.cron import (
    CronError,
    CronExpression,
    fire_wall_time,
    parse_timezone,
    wall_time_instant,
)

MAX_DEADLINE_SECONDS = 7 * 86_400


class Deadline(BaseModel):
    """Finished within ``within_seconds`` of its nominal time (a schedule's fire) or of its
    submission; past it the run is reported, and cancelled if ``cancel``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    within_seconds: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_DEADLINE_SECONDS,
            description="seconds after its schedule's nominal fire time (local wall-clock "
            "time in the schedule's zone) or its submission by which it must have finished; "
            "at most 7 days",
        ),
    ]
    cancel: bool = Field(default=False, description="cancel the run when it misses it")


@dataclass(frozen=True)
class Fire:
    """A schedule's fire: its nominal instant, and the cron and zone that name its wall time."""

    nominal: datetime
    cron: str
    timezone: str


def deadline_at(deadline: Deadline | None, since: datetime | Fire) -> datetime | None:
    """The UTC instant by which a run must have finished: elapsed time from a submission
    (``since`` an instant). From a schedule's fire the duration is added to the fire's local
    wall-clock time and the result placed in the zone as cron places a fire: "02:00 + 5 h" is
    07:00 local even across a clock change (and on the night 02:00 is skipped); a result the
    spring-forward gap skips becomes the first instant after it, a repeated one its first
    occurrence."""
    if deadline is None:
        return None
    within = timedelta(seconds=deadline.within_seconds)
    if isinstance(since, datetime):
        return since.astimezone(UTC) + within
    wall, zone = wall_time_of(since)
    return wall_time_instant(zone, wall + within)


UNKNOWN_SCHEDULE = ("* * * * *", "UTC")  # a fire told in UTC: its schedule is gone


def told_fire(nominal: datetime, cron: str, timezone: str) -> Fire:
    """A stored fire to tell: in UTC when its schedule's cron or zone is no longer valid."""
    try:
        _compiled(cron, timezone)
    except CronError:
        return Fire(nominal, *UNKNOWN_SCHEDULE)
    return Fire(nominal, cron, timezone)


def wall_time_of(fire: Fire) -> tuple[datetime, ZoneInfo]:
    """The naive local time a fire stands for, and its zone (``CronError`` for a cron or zone
    no longer valid)."""
    expression, zone = _compiled(fire.cron, fire.timezone)
    return fire_wall_time(expression, zone, fire.nominal), zone


@lru_cache(maxsize=4096)
def _compiled(cron: str, timezone: str) -> tuple[CronExpression, ZoneInfo]:
    """A stored schedule's cron and zone (valid when it was stored: seconds allowed)."""
    return CronExpression.parse(cron, allow_seconds=True), parse_timezone(timezone)


def describe(deadline_at_utc: datetime, zone: ZoneInfo | None) -> str:
    """The instant as a person reads it: local time in the schedule's zone, else UTC."""
    if zone is None:
        return f"{deadline_at_utc:%Y-%m-%d %H:%M:%S} UTC"
    return f"{deadline_at_utc.astimezone(zone):%Y-%m-%d %H:%M} {zone.key}"


def duration_words(seconds: int) -> str:
    """5h, 90min, 45s: a duration as people write one."""
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}min"
    return f"{seconds}s"
