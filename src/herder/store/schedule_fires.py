"""What firing a schedule reads and writes (the use case is ``app/firing.py``): a due
schedule as a firer read it, when it fires next, the run a fire makes, and the guarded
writes — a batch's schedules advanced under the fence, their counts put right where a run
was not made, a fire by hand counted.

The fence: a schedule moves on, with its counters, only if it is still as it was read (its
nominal time and its last change), in one statement for the whole batch — one fired
meanwhile by another firer, or changed, moves nothing and so fires nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Integer, Update, func, update
from sqlalchemy.types import TypeEngine

from herder.clock import epoch_ms
from herder.domain.deadlines import Fire, deadline_at
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec
from herder.domain.lifecycle.changes import Event, NewRun
from herder.domain.limits import fielded
from herder.domain.models import Job
from herder.domain.overrides import apply_overrides
from herder.domain.schedules import ScheduleSpec, jitter_offset
from herder.domain.states import RunState
from herder.store.dialect import update_rows
from herder.store.schedule_events import schedule_event
from herder.store.schema import ID, schedules
from herder.store.types import UtcDateTime
from herder.store.work import Work


@dataclass(frozen=True)
class DueSchedule:
    """A schedule as a firer read it; it fires only if it is still so (``updated_at`` moves
    with every change to it and every fire)."""

    id: str
    tenant_id: str
    job_id: str | None
    spec: ScheduleSpec
    next_fire_at: datetime
    updated_at: datetime
    last_fired_for: datetime | None
    workflow_id: str | None = None  # a schedule of a workflow's runs, not a job's


def due_schedule(row: Any) -> DueSchedule:
    """A schedule's row as a firer reads it."""
    return DueSchedule(row.id, row.tenant_id, row.job_id, ScheduleSpec.model_validate(row.spec),
                       row.next_fire_at, row.updated_at, row.last_fired_for,
                       row.workflow_id)  # fmt: skip


def next_fire_values(
    schedule_id: str, spec: ScheduleSpec, nominal: datetime | None
) -> dict[str, datetime | None]:
    """The schedule's next nominal fire, and when it is due (plus its jitter)."""
    due = None if nominal is None else nominal + jitter_offset(schedule_id, spec.jitter_seconds)
    return {"next_fire_at": nominal, "next_due_at": due}


def scheduled_spec(job: Job, schedule: ScheduleSpec) -> JobSpec:
    """What the schedule's runs of the job run: the job's spec under the schedule's overrides,
    limits and deadline (``Invalid`` where the job changed so that they no longer fit)."""
    spec = apply_overrides(job.spec, schedule.overrides, limits=fielded(schedule.limits))
    if schedule.deadline is not None:  # the schedule's deadline wins over its job's
        spec = spec.model_copy(update={"deadline": schedule.deadline})
    return spec


def scheduled_run(
    work: Work, due: DueSchedule, job: Job, spec: JobSpec, nominal: datetime, actor: str,
    message: str, *, created_by: str | None = None,
) -> NewRun:  # fmt: skip
    """A queued run of the schedule's job for its fire at ``nominal``; its creator is
    ``created_by``, else ``actor`` (a fire by hand: the caller)."""
    run_id = new_id("run", epoch_ms(work.now))
    event = Event(run_id, message, actor, target=RunState.QUEUED)
    fired = Fire(nominal, due.spec.cron, due.spec.timezone)
    return NewRun(run_id, due.tenant_id, job.id, job.name, spec, event,
                  schedule_id=due.id, scheduled_for=nominal,
                  deadline_at=deadline_at(spec.deadline, fired),
                  created_by=created_by)  # fmt: skip


@dataclass(frozen=True)
class Advance:
    """A schedule moved on to its next fire, with what its fire decided counted."""

    due: DueSchedule
    next_nominal: datetime | None
    missed: int
    fired: int
    skipped: int
    last_fired_for: datetime | None


def advance(work: Work, advances: Sequence[Advance]) -> set[str]:
    """Each schedule moved on, only if it is as read (the fence); the ids of those moved."""
    rows = [
        {"id": one.due.id, "read_fire_at": one.due.next_fire_at,
         "read_updated_at": one.due.updated_at, "missed": one.missed, "fired": one.fired,
         "skipped": one.skipped, "last_fired_for": one.last_fired_for, "now": work.now,
         **next_fire_values(one.due.id, one.due.spec, one.next_nominal)}
        for one in advances
    ]  # fmt: skip
    return set(update_rows(work.connection, _ADVANCE_COLUMNS, rows, _advance))


_ADVANCE_COLUMNS: dict[str, TypeEngine[Any]] = {
    "id": ID, "read_fire_at": UtcDateTime(), "read_updated_at": UtcDateTime(),
    "next_fire_at": UtcDateTime(), "next_due_at": UtcDateTime(), "missed": Integer(),
    "fired": Integer(), "skipped": Integer(), "last_fired_for": UtcDateTime(),
    "now": UtcDateTime(),
}  # fmt: skip


def _advance(row: Mapping[str, ColumnElement[Any]]) -> Update:
    return (
        update(schedules)
        .where(
            schedules.c.id == row["id"],
            schedules.c.next_fire_at == row["read_fire_at"],
            schedules.c.updated_at == row["read_updated_at"],
            schedules.c.paused.is_(False),
        )
        .values(
            next_fire_at=row["next_fire_at"],
            next_due_at=row["next_due_at"],
            missed_count=schedules.c.missed_count + row["missed"],
            fired_count=schedules.c.fired_count + row["fired"],
            skipped_count=schedules.c.skipped_count + row["skipped"],
            last_fired_for=func.coalesce(row["last_fired_for"], schedules.c.last_fired_for),
            updated_at=row["now"],
        )
        .returning(schedules.c.id)
    )


@dataclass(frozen=True)
class Recount:
    """A schedule's counts put right: fires counted whose run was not made (``refused``),
    of which ``skipped`` a limit's ``drop`` refused; its last fire as made."""

    schedule_id: str
    refused: int
    skipped: int
    last_fired_for: datetime | None


def recount(connection: Connection, recounts: Sequence[Recount]) -> None:
    rows = [
        {"id": one.schedule_id, "refused": one.refused, "skipped": one.skipped,
         "last_fired_for": one.last_fired_for}
        for one in recounts
    ]  # fmt: skip
    update_rows(connection, _RECOUNT_COLUMNS, rows, _recount)


_RECOUNT_COLUMNS: dict[str, TypeEngine[Any]] = {
    "id": ID, "refused": Integer(), "skipped": Integer(), "last_fired_for": UtcDateTime(),
}  # fmt: skip


def _recount(row: Mapping[str, ColumnElement[Any]]) -> Update:
    return (
        update(schedules)
        .where(schedules.c.id == row["id"])
        .values(
            fired_count=schedules.c.fired_count - row["refused"],
            skipped_count=schedules.c.skipped_count + row["skipped"],
            last_fired_for=row["last_fired_for"],
        )
        .returning(schedules.c.id)
    )


def record_triggered(work: Work, schedule_id: str, started: str, what: str) -> None:
    """A fire by hand: counted, and told in the schedule's history (its next fire stays)."""
    work.connection.execute(
        update(schedules)
        .where(schedules.c.id == schedule_id)
        .values(fired_count=schedules.c.fired_count + 1)
    )
    schedule_event(
        work.connection, schedule_id, work.now, "triggered", f"fired by hand: {what}",
        scheduled_for=work.now, run_id=started,
    )  # fmt: skip
