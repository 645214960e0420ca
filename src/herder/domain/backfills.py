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

from herder.domain.errors import Conflict
from herder.domain.jobs import JobSpec, Priority
from herder.domain.models import _Record

MAX_ACTIVE = 100
BACKFILL_PRIORITY = Priority.LOW  # a backfill never starves current work


class BackfillState(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"  # every nominal time in the range has been run
    CANCELLED = "cancelled"  # no more starts; runs already started go on

    @property
    def is_terminal(self) -> bool:
        return self is not BackfillState.RUNNING


BACKFILL_TRANSITIONS: dict[BackfillState, frozenset[BackfillState]] = {
    BackfillState.RUNNING: frozenset(
        {
            BackfillState.RUNNING,  # a step: its cursor and counts move on
            BackfillState.FINISHED,
            BackfillState.CANCELLED,
        }
    ),
    BackfillState.FINISHED: frozenset(),
    BackfillState.CANCELLED: frozenset(),
}


def check_backfill_transition(source: BackfillState, target: BackfillState) -> None:
    """Raise ``Conflict`` naming both states when ``source → target`` is not a legal move."""
    if target not in BACKFILL_TRANSITIONS[source]:
        raise Conflict(f"backfill is already {source}; a {source} backfill cannot become {target}")


def backfill_run_spec(spec: JobSpec) -> JobSpec:
    """The spec a backfill's run gets, a job's or a workflow task's: at ``low`` priority."""
    return spec.model_copy(update={"priority": BACKFILL_PRIORITY})


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
