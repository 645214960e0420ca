"""Firing a batch of due schedules in one unit of work, set-based: a few statements per
batch, whatever its size — the cost is in proportion to the schedules due (DESIGN §4).

    advance   one guarded UPDATE: each schedule moves on only from the nominal time it
              was read at — the fence; one moved meanwhile by another firer fires nothing
    misses    one INSERT of the "missed" events
    read      the jobs in one query; the active runs of forbid/replace schedules in one
    decide    pure: each schedule's runs under its concurrency policy (``fire``)
    apply     the runs and their events inserted, replaced runs cancelled (``Work.apply``);
              the unique key (schedule, nominal time) makes a repeat insert nothing
    record    one INSERT of "skipped"/"replaced" events; one UPDATE of the counters
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Integer, Update, func, update
from sqlalchemy.types import TypeEngine

from herder.clock import epoch_ms
from herder.domain.errors import NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import apply_overrides
from herder.domain.lifecycle.changes import Event, NewRun, combine
from herder.domain.lifecycle.concurrency import Fires, fire
from herder.domain.lifecycle.facts import ActiveRun, RunFacts
from herder.domain.models import Job
from herder.domain.schedules import ConcurrencyPolicy, FirePlan, ScheduleSpec, jitter_offset
from herder.domain.states import RunState
from herder.store.dialect import update_rows
from herder.store.jobs import JobRepository
from herder.store.runs.facts import active_of_schedules
from herder.store.schedule_events import (
    NewScheduleEvent,
    record_schedule_events,
    replaced_events,
)
from herder.store.schema import ID, schedules
from herder.store.types import UtcDateTime
from herder.store.work import Work

_NEEDS_ACTIVE = (ConcurrencyPolicy.FORBID, ConcurrencyPolicy.REPLACE)


@dataclass(frozen=True)
class DueSchedule:
    id: str
    tenant_id: str
    job_id: str
    spec: ScheduleSpec
    next_fire_at: datetime


def next_fire_values(
    schedule_id: str, spec: ScheduleSpec, nominal: datetime | None
) -> dict[str, datetime | None]:
    """The schedule's next nominal fire, and when it is due (plus its jitter)."""
    due = None if nominal is None else nominal + jitter_offset(schedule_id, spec.jitter_seconds)
    return {"next_fire_at": nominal, "next_due_at": due}


def fire_batch(
    work: Work, jobs: JobRepository, batch: Sequence[tuple[DueSchedule, FirePlan]], actor: str
) -> int:
    """Apply each plan once (the stages in the module's docstring); the runs made."""
    advanced = _advance(work, batch)
    firing = [(due, plan) for due, plan in batch if due.id in advanced and plan.fire]
    found = jobs.get_many_within(
        work.connection, {(due.tenant_id, due.job_id) for due, _ in firing}
    )
    active = active_of_schedules(
        work.connection,
        [due.id for due, _ in firing if due.spec.concurrency_policy in _NEEDS_ACTIVE],
    )
    decided = [
        (due, _decide(work, due, plan, _job_of(found, due), active.get(due.id, []), actor))
        for due, plan in firing
    ]
    applied = work.apply(combine(fires.changes for _, fires in decided))
    _record(work, decided, applied.inserted)
    return len(applied.inserted)


_ADVANCE_COLUMNS: dict[str, TypeEngine[Any]] = {
    "id": ID, "expected": UtcDateTime(), "next_fire_at": UtcDateTime(),
    "next_due_at": UtcDateTime(), "missed": Integer(),
}  # fmt: skip


def _advance(work: Work, batch: Sequence[tuple[DueSchedule, FirePlan]]) -> set[str]:
    """Move the schedules to their next fires; the ids moved. One not moved was fired (or
    changed, or paused) meanwhile, and fires nothing here."""

    def statement(row: Mapping[str, ColumnElement[Any]]) -> Update:
        return (
            update(schedules)
            .where(
                schedules.c.id == row["id"],
                schedules.c.next_fire_at == row["expected"],
                schedules.c.paused.is_(False),
            )
            .values(
                next_fire_at=row["next_fire_at"],
                next_due_at=row["next_due_at"],
                missed_count=schedules.c.missed_count + row["missed"],
                updated_at=work.now,
            )
            .returning(schedules.c.id)
        )

    rows = [
        {"id": due.id, "expected": due.next_fire_at, "missed": plan.missed,
         **next_fire_values(due.id, due.spec, plan.next_nominal)}
        for due, plan in batch
    ]  # fmt: skip
    advanced = set(update_rows(work.connection, _ADVANCE_COLUMNS, rows, statement))
    missed = [_missed(due, plan) for due, plan in batch if plan.missed and due.id in advanced]
    record_schedule_events(work.connection, work.now, missed)
    return advanced


def _missed(due: DueSchedule, plan: FirePlan) -> NewScheduleEvent:
    message = (
        f"{plan.missed} fire(s) missed while no scheduler ran (the last for "
        f"{plan.last_missed:%Y-%m-%d %H:%M:%S} UTC); misfire policy {due.spec.misfire_policy}"
    )
    return NewScheduleEvent(due.id, "missed", message, scheduled_for=plan.last_missed)


def _job_of(found: Mapping[tuple[str, str], Job], due: DueSchedule) -> Job:
    job = found.get((due.tenant_id, due.job_id))
    if job is None:
        raise NotFound(f"job {due.job_id} not found")
    return job


def _decide(
    work: Work,
    due: DueSchedule,
    plan: FirePlan,
    job: Job,
    active: Sequence[ActiveRun],
    actor: str,
) -> Fires:
    spec = apply_overrides(job.spec, due.spec.overrides)
    new_runs = []
    for nominal in plan.fire:
        run_id = new_id("run", epoch_ms(work.now))
        message = f"fired by schedule {due.id} for {nominal:%Y-%m-%d %H:%M:%S} UTC"
        event = Event(run_id, message, actor, target=RunState.QUEUED)
        new_runs.append(
            NewRun(run_id, due.tenant_id, job.id, job.name, spec, event,
                   schedule_id=due.id, scheduled_for=nominal)
        )  # fmt: skip
    return fire(due.id, due.spec.concurrency_policy, active, new_runs, work.now)


_COUNT_COLUMNS: dict[str, TypeEngine[Any]] = {
    "id": ID, "fired": Integer(), "skipped": Integer(), "last_fired_for": UtcDateTime(),
}  # fmt: skip


def _record(
    work: Work, decided: Sequence[tuple[DueSchedule, Fires]], inserted: frozenset[str]
) -> None:
    """The schedules' counters and their unusual events (their runs' events record fires)."""
    events: list[NewScheduleEvent] = []
    counts: list[dict[str, Any]] = []
    for due, fires in decided:
        events += [_skipped(due, nominal, blocking) for nominal, blocking in fires.skipped]
        events += replaced_events(due.id, fires.replaced)
        fired = [new.scheduled_for for new in fires.changes.new_runs if new.id in inserted]
        if fired or fires.skipped:
            counts.append(
                {"id": due.id, "fired": len(fired), "skipped": len(fires.skipped),
                 "last_fired_for": max((moment for moment in fired if moment), default=None)}
            )  # fmt: skip
    record_schedule_events(work.connection, work.now, events)
    update_rows(work.connection, _COUNT_COLUMNS, counts, _count)


def _skipped(due: DueSchedule, nominal: datetime, blocking: RunFacts) -> NewScheduleEvent:
    message = (
        f"not fired: run {blocking.id} of this schedule is still {blocking.state} "
        "(concurrency policy forbid)"
    )
    return NewScheduleEvent(due.id, "skipped", message, scheduled_for=nominal)


def _count(row: Mapping[str, ColumnElement[Any]]) -> Update:
    return (
        update(schedules)
        .where(schedules.c.id == row["id"])
        .values(
            fired_count=schedules.c.fired_count + row["fired"],
            skipped_count=schedules.c.skipped_count + row["skipped"],
            last_fired_for=func.coalesce(row["last_fired_for"], schedules.c.last_fired_for),
        )
        .returning(schedules.c.id)
    )
