"""Schedules: what a schedule is, and the pure decisions of firing it — which nominal times
fire now, which were missed, when it fires next, and its deterministic jitter."""

from __future__ import annotations

import hashlib
import json
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Self
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, model_validator

from herder.domain.cron import CronExpression, fires_between, next_fire
from herder.domain.deadlines import Deadline
from herder.domain.jobs import check_job_name
from herder.domain.limits import LimitReferences
from herder.domain.overrides import RunOverrides, StandingOverrides

MISFIRE_GRACE = timedelta(seconds=60)  # a fire later than this was missed (schedulers down)
MAX_COUNTED_MISSES = 1_000_000  # misses past this are a lower bound (~8 s of counting)
COUNT_CHUNK = 10_000
MAX_JITTER_SECONDS = 3600
DEFINITION_TAG_BITS = 48  # a JSON number every client reads exactly (JavaScript's is 53 bits)


class MisfirePolicy(StrEnum):
    RUN_ONCE = "run_once"  # one catch-up run, for the most recent missed time
    SKIP = "skip"  # record the misses, run nothing
    ALL = "all"  # every missed time, up to misfire_limit (the most recent ones)


class ConcurrencyPolicy(StrEnum):
    ALLOW = "allow"
    FORBID = "forbid"  # skip a fire while the previous run is active (recorded)
    REPLACE = "replace"  # cancel the active run, start the new one


class ScheduleSpec(BaseModel):
    """Everything about when and how a job is fired."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: Annotated[str, Field(min_length=1, max_length=256, examples=["0 * * * *"])]
    timezone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter_seconds: Annotated[int, Field(ge=0, le=MAX_JITTER_SECONDS)] = 0
    overrides: StandingOverrides = RunOverrides()
    misfire_policy: MisfirePolicy = MisfirePolicy.RUN_ONCE
    misfire_limit: Annotated[int, Field(ge=1, le=1000)] = 100
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    limits: LimitReferences = []  # over the job's: a later reference to the same limit wins
    deadline: Deadline | None = Field(
        default=None,
        description="each fire's run finished within this long of its nominal time, counted "
        "in local time in the schedule's zone; over its job's or workflow's (docs/deadlines.md)",
    )

    @model_validator(mode="after")
    def _window(self) -> Self:
        for name in ("start_at", "end_at"):
            moment = getattr(self, name)
            if moment is not None and moment.tzinfo is None:
                raise ValueError(f"{name} needs a time zone offset, e.g. 2026-12-01T00:00:00Z")
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            raise ValueError("end_at must be after start_at")
        return self


def check_schedule_name(name: str | None) -> str | None:
    """A schedule's optional name follows the rules of a job's: it is what a definitions file
    (``herder apply``) calls it by."""
    return None if name is None else check_job_name(name)


def definition_tag(spec: ScheduleSpec) -> int:
    """A number that names a schedule's definition, for its ``ETag``: the same while the spec
    is, another once an edit changes it. Drawn from the spec rather than counted, as a
    schedule has no version column, and so that fires (which touch the row) leave it as is."""
    canonical = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).digest()
    return int.from_bytes(digest, "big") >> (256 - DEFINITION_TAG_BITS)


def jitter_offset(schedule_id: str, jitter_seconds: int) -> timedelta:
    """The same offset in [0, jitter] for a schedule every time: its fires spread, stably."""
    if jitter_seconds == 0:
        return timedelta(0)
    digest = int.from_bytes(hashlib.sha256(schedule_id.encode()).digest()[:8], "big")
    return timedelta(seconds=digest % (jitter_seconds + 1))


@dataclass(frozen=True)
class FirePlan:
    fire: list[datetime]  # nominal times to run now
    missed: int  # nominal times that will not run (recorded, counted)
    last_missed: datetime | None
    next_nominal: datetime | None  # None: the schedule has ended


def first_fire(
    expression: CronExpression, zone: ZoneInfo, spec: ScheduleSpec, now: datetime
) -> datetime | None:
    """The first nominal fire of a new (or resumed) schedule."""
    after = max(now, spec.start_at - timedelta(microseconds=1)) if spec.start_at else now
    return _within_end(next_fire(expression, zone, after), spec)


def plan_fires(
    expression: CronExpression,
    zone: ZoneInfo,
    spec: ScheduleSpec,
    due: datetime,
    now: datetime,
    grace: timedelta = MISFIRE_GRACE,
) -> FirePlan:
    """What to do with a schedule whose nominal fire ``due`` has come (``due <= now``): on
    time (within ``grace``) it fires; later, its misfire policy decides."""
    if now - due <= grace:
        following = next_fire(expression, zone, due)
        return FirePlan([due], 0, None, _within_end(following, spec))
    end = now if spec.end_at is None else min(now, spec.end_at)
    overdue, recent = _overdue(expression, zone, due, end, keep=spec.misfire_limit + 1)
    following = _within_end(next_fire(expression, zone, now), spec)
    if spec.misfire_policy is MisfirePolicy.SKIP:
        fire: list[datetime] = []
    elif spec.misfire_policy is MisfirePolicy.RUN_ONCE:
        fire = recent[-1:]
    else:
        fire = recent[-spec.misfire_limit :]
    missed = overdue - len(fire)
    last_missed = recent[-len(fire) - 1] if missed and len(recent) > len(fire) else None
    return FirePlan(fire, missed, last_missed, following)


def _overdue(
    expression: CronExpression, zone: ZoneInfo, due: datetime, end: datetime, keep: int
) -> tuple[int, list[datetime]]:
    """How many nominal times fell in [due, end], and the latest ``keep`` of them — counted
    in chunks, so memory stays bounded however long the schedulers were down."""
    count, recent = 1, deque([due], maxlen=keep)
    cursor = due
    while count < MAX_COUNTED_MISSES:
        chunk = fires_between(expression, zone, cursor, end, COUNT_CHUNK)
        count += len(chunk)
        recent.extend(chunk)
        if len(chunk) < COUNT_CHUNK:
            return count, list(recent)
        cursor = chunk[-1]
    # Past the counting limit: the count is a lower bound; find the latest times directly.
    window = timedelta(hours=1)
    while window < end - cursor:
        tail = fires_between(expression, zone, end - window, end, keep)
        if tail:
            return count, tail[-keep:]
        window *= 4
    return count, list(recent)


def _within_end(moment: datetime | None, spec: ScheduleSpec) -> datetime | None:
    if moment is None or (spec.end_at is not None and moment > spec.end_at):
        return None
    return moment
