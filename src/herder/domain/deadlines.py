"""Deadlines: a run (or workflow run) must have finished within a duration of its nominal
time — a schedule fire's, counted on the schedule's local wall clock — or of its submission.
The instant is fixed when the run is made; the reaper raises ``deadline_missed`` past it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field

from herder.domain.cron import wall_time_instant

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
class Measured:
    """What a deadline counts from: a schedule fire's nominal instant in its zone, or a
    submission (``zone`` None: plain elapsed time)."""

    since: datetime
    zone: ZoneInfo | None = None


def deadline_at(deadline: Deadline | None, measured: Measured) -> datetime | None:
    """The UTC instant by which the run must have finished. From a fire, the duration is
    added to the local wall-clock time and the result placed in the zone as cron places a
    fire: "02:00 + 5 h" is 07:00 local even across a clock change; a time the spring-forward
    gap skips becomes the first instant after it, a repeated one its first occurrence."""
    if deadline is None:
        return None
    within = timedelta(seconds=deadline.within_seconds)
    if measured.zone is None:
        return measured.since.astimezone(UTC) + within
    local = measured.since.astimezone(measured.zone).replace(tzinfo=None) + within
    return wall_time_instant(measured.zone, local)


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
