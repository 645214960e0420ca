"""Backfills: a schedule's nominal times over a past range, run as if each had fired, a few
at a time so they cannot starve current work.

Each nominal time gets at most one run — the schedule's unique key (schedule, nominal time)
makes a time the schedule already fired, or another backfill already ran, count as run — and
a backfill's runs are queued at ``low`` priority. When one of its runs ends, the next nominal
time starts, never more than ``max_active`` at once.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from herder.domain.models import _Record

MAX_ACTIVE = 100


class BackfillState(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"  # every nominal time in the range has been run
    CANCELLED = "cancelled"  # no more starts; runs already started go on


class BackfillRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: AwareDatetime = Field(description="nominal times after this (exclusive)")
    end: AwareDatetime = Field(description="up to this (inclusive); not in the future")
    max_active: Annotated[int, Field(ge=1, le=MAX_ACTIVE)] = Field(
        default=1, description="runs of the backfill active at once"
    )

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.end <= self.start:
            raise ValueError("end must be after start")
        return self


class Backfill(_Record):
    id: str
    schedule_id: str
    start: datetime
    end: datetime
    max_active: int
    state: BackfillState
    cursor: datetime | None  # the last nominal time started (or found already run)
    started: int  # runs it made
    already_run: int  # nominal times that had a run already
    created_at: datetime
    finished_at: datetime | None
