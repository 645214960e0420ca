"""Backfills: a schedule's nominal times over a past range, run as if each had fired, a few
at a time so they cannot starve current work — and a step's decisions (``step``, the
``Tally`` it keeps, the runs it makes), which the store applies.

Each nominal time gets at most one run — the schedule's unique key (schedule, nominal time)
makes a time the schedule already fired, or another backfill already ran, count as run — and
a backfill's runs are queued at ``low`` priority. When one of its runs ends, the next nominal
time starts, never more than ``max_active`` at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Annotated, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from herder.domain.backfill_states import BackfillState
from herder.domain.jobs import JobSpec, Priority
from herder.domain.lifecycle.changes import Changes, Event, NewRun, backfill_transition
from herder.domain.models import _Record
from herder.domain.states import RunState

__all__ = [  # BackfillState re-exported: its home is ``backfill_states``
    "BACKFILL_PRIORITY", "MAX_ACTIVE", "Backfill", "BackfillFacts", "BackfillRequest",
    "BackfillState", "Tally", "backfill_job_runs", "backfill_run_spec", "first_tally",
    "refused_at", "step", "still_to_start", "tallied",
]  # fmt: skip


MAX_ACTIVE = 100
BACKFILL_PRIORITY = Priority.LOW  # a backfill never starves current work


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


@dataclass(frozen=True)
class BackfillFacts:
    """A running backfill as a step reads it, its row locked."""

    id: str
    start: datetime
    end: datetime
    cursor: datetime | None
    started: int
    already_run: int
    max_active: int
    active: int  # its runs (a workflow's: its workflow runs) active now

    @property
    def free(self) -> int:
        return max(self.max_active - self.active, 0)


@dataclass(frozen=True)
class Tally:
    """What a step has done so far: the last nominal time it tried, the runs it made, the
    times that had a run already; whether the range is done, or its runs cannot start."""

    cursor: datetime
    started: int = 0
    already: int = 0
    exhausted: bool = False
    refused: bool = False


def first_tally(backfill: BackfillFacts) -> Tally:
    return Tally(backfill.cursor or backfill.start)


def still_to_start(backfill: BackfillFacts, tally: Tally) -> int:
    """How many more runs the step starts: while fewer than ``max_active`` are active."""
    if tally.exhausted or tally.refused:
        return 0
    return max(backfill.free - tally.started, 0)


def tallied(tally: Tally, tried: Sequence[datetime], made: int) -> Tally:
    """The step after trying these nominal times (oldest first), ``made`` of them new: the
    rest had a run already (the schedule's unique key says so)."""
    if not tried:
        return replace(tally, exhausted=True)
    return replace(
        tally,
        cursor=tried[-1],
        started=tally.started + made,
        already=tally.already + len(tried) - made,
    )


def refused_at(tally: Tally, nominal: datetime) -> Tally:
    """Its runs cannot start (its job changed since: the schedule's overrides no longer fit)."""
    return replace(tally, cursor=nominal, refused=True)


def step(backfill: BackfillFacts, tally: Tally, active_after: int, now: datetime) -> Changes:
    """The backfill's move at the end of a step: its cursor and counts; ``cancelled`` when
    its runs cannot start, ``finished`` once the range is done and none of its runs is
    active (``active_after``, counting those the step started)."""
    target = BackfillState.RUNNING
    if tally.refused:
        target = BackfillState.CANCELLED
    elif tally.exhausted and active_after == 0:
        target = BackfillState.FINISHED
    move = backfill_transition(
        backfill.id, BackfillState.RUNNING, target, now,
        cursor=tally.cursor if tally.cursor != backfill.start else backfill.cursor,
        started=backfill.started + tally.started,
        already_run=backfill.already_run + tally.already,
    )  # fmt: skip
    return Changes(backfill_moves=(move,))


def backfill_job_runs(
    backfill_id: str,
    tenant_id: str,
    schedule_id: str,
    job: tuple[str, str, JobSpec],
    nominals: Sequence[datetime],
    new_run_id: Callable[[], str],
) -> list[NewRun]:
    """A run of the schedule's job (id, name, spec with the schedule's overrides) for each
    nominal time, at ``low`` priority, keyed by the schedule and the nominal time."""
    job_id, job_name, spec = job
    new_runs = []
    for nominal in nominals:
        run_id = new_run_id()
        message = (
            f"backfill {backfill_id} of schedule {schedule_id} for {nominal:%Y-%m-%d %H:%M:%S} UTC"
        )
        new_runs.append(
            NewRun(
                run_id,
                tenant_id,
                job_id,
                job_name,
                backfill_run_spec(spec),
                Event(run_id, message, f"backfill:{backfill_id}", target=RunState.QUEUED),
                schedule_id=schedule_id,
                scheduled_for=nominal,
                backfill_id=backfill_id,
            )
        )
    return new_runs
