"""Firing a batch of due schedules in one unit of work, set-based: a few statements per
batch, whatever its size — the cost is in proportion to the schedules due (docs/design.md §4).

    read      the jobs in one query; the active runs of forbid/replace schedules in one; the
              room under each tenant's ``max_queued`` (its row held: ``store.queue_room``)
    decide    pure: the fires the room takes (the rest are skipped and recorded), each
              schedule's runs under its concurrency policy (``fire``)
    advance   one guarded UPDATE: each schedule moves on, with its counters, only if it is
              still as it was read (its nominal time and its last change) — the fence; one
              fired meanwhile by another firer, or changed, fires nothing
    apply     the runs of the schedules advanced and their events inserted, replaced runs
              cancelled (``Work.apply``); the unique key (schedule, nominal time) makes a
              repeat insert nothing
    record    one INSERT of "missed", "skipped" and "replaced" events; the counters of a
              schedule whose run the unique key refused are put right
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Integer, Update, func, update
from sqlalchemy.types import TypeEngine

from herder.clock import epoch_ms
from herder.domain.deadlines import Fire, deadline_at
from herder.domain.errors import Invalid, NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec
from herder.domain.lifecycle.changes import Changes, Event, NewRun, combine
from herder.domain.lifecycle.concurrency import Fires, fire
from herder.domain.lifecycle.facts import ActiveRun, RunFacts
from herder.domain.limits import fielded
from herder.domain.models import Job
from herder.domain.overrides import apply_overrides
from herder.domain.queue_room import UNLIMITED, QueueRoom
from herder.domain.schedules import ConcurrencyPolicy, FirePlan, ScheduleSpec, jitter_offset
from herder.domain.states import RunState
from herder.store.dialect import update_rows
from herder.store.jobs import JobRepository
from herder.store.queue_room import queue_rooms
from herder.store.runs.facts import active_of_schedules
from herder.store.runs.limit_rooms import by_limits
from herder.store.schedule_events import (
    NewScheduleEvent,
    record_schedule_events,
    replaced_events,
)
from herder.store.schema import ID, schedules
from herder.store.types import UtcDateTime
from herder.store.work import Work
from herder.store.workflows.scheduled import start_scheduled
from herder.telemetry import metrics

_NEEDS_ACTIVE = (ConcurrencyPolicy.FORBID, ConcurrencyPolicy.REPLACE)


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
    firing = [(due, plan) for due, plan in batch if plan.fire and due.job_id is not None]
    found = jobs.get_many_within(
        work.connection, {(due.tenant_id, due.job_id) for due, _ in firing if due.job_id}
    )
    active = active_of_schedules(
        work.connection,
        [due.id for due, _ in firing if due.spec.concurrency_policy in _NEEDS_ACTIVE],
    )
    rooms = queue_rooms(work, {due.tenant_id for due, plan in batch if plan.fire}, wait=True)
    decided = []
    for due, plan in batch:
        room = rooms.get(due.tenant_id, UNLIMITED)
        fire_now, past_room = room.split(plan.fire)
        fires, refused = _decide(work, due, fire_now, found, active.get(due.id, []), actor)
        taking = len(fire_now) if due.workflow_id is not None else len(fires.changes.new_runs)
        rooms[due.tenant_id] = room.taken(taking)
        over_room = _over_room(due, past_room, room)
        decided.append(_Decided(due, plan, fires, fire_now, over_room, refused))
    advanced = set(
        update_rows(work.connection, _ADVANCE_COLUMNS, _advances(work, decided), _advance)
    )
    decided = [one for one in decided if one.due.id in advanced]
    changes, dropped = _under_limits(work, decided)
    applied = work.apply(changes)
    made: dict[str, list[datetime]] = {
        one.due.id: [
            new.scheduled_for
            for new in one.fires.changes.new_runs
            if new.id in applied.inserted and new.scheduled_for is not None
        ]
        for one in decided
    }
    for one in decided:
        if one.due.workflow_id is not None and one.fire:
            made[one.due.id] = start_scheduled(work, one.due, one.fire, actor)
    _record(work, decided, made, dropped)
    due_times, missed = _due_times(decided, made), sum(one.plan.missed for one in decided)
    work.after_commit.append(lambda: metrics.schedules_fired(work.now, due_times, missed))
    return sum(len(nominals) for nominals in made.values())


def _under_limits(
    work: Work, decided: Sequence[_Decided]
) -> tuple[Changes, list[NewScheduleEvent]]:
    """The batch's fires under their limits' strategies, at once (``runs.limit_rooms``): a
    fire ``drop`` refuses is recorded skipped, naming the limit and key."""
    changes = combine(one.fires.changes for one in decided)
    limited = by_limits(work.connection, changes.new_runs, work.now)
    if not limited.dropped:
        return replace(changes, new_runs=limited.new_runs) + limited.changes, []
    skipped = [
        NewScheduleEvent(new.schedule_id, "skipped", f"not fired: {limited.dropped[new.id]}",
                         scheduled_for=new.scheduled_for)
        for new in changes.new_runs
        if new.id in limited.dropped and new.schedule_id is not None
    ]  # fmt: skip
    return replace(changes, new_runs=limited.new_runs) + limited.changes, skipped


def _due_times(
    decided: Sequence[_Decided], made_for: Mapping[str, Sequence[datetime]]
) -> Iterator[datetime]:
    """When each run made was due: its nominal time plus its schedule's jitter."""
    for one in decided:
        offset = jitter_offset(one.due.id, one.due.spec.jitter_seconds)
        for nominal in made_for.get(one.due.id, []):
            yield nominal + offset


@dataclass(frozen=True)
class _Decided:
    due: DueSchedule
    plan: FirePlan
    fires: Fires
    fire: list[datetime]  # the plan's fires the tenant's max_queued leaves room for
    over_room: list[NewScheduleEvent]  # the rest, skipped
    refused: str | None = None  # why its job's runs cannot start with its overrides

    @property
    def to_fire(self) -> list[datetime]:
        if self.due.workflow_id is not None:
            return list(self.fire)
        return [new.scheduled_for for new in self.fires.changes.new_runs if new.scheduled_for]


_ADVANCE_COLUMNS: dict[str, TypeEngine[Any]] = {
    "id": ID, "read_fire_at": UtcDateTime(), "read_updated_at": UtcDateTime(),
    "next_fire_at": UtcDateTime(), "next_due_at": UtcDateTime(), "missed": Integer(),
    "fired": Integer(), "skipped": Integer(), "last_fired_for": UtcDateTime(),
    "now": UtcDateTime(),
}  # fmt: skip


def _advance(row: Mapping[str, ColumnElement[Any]]) -> Update:
    """Move a schedule to its next fire and count what it decided — only if it is as read."""
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


def _advances(work: Work, decided: Sequence[_Decided]) -> list[dict[str, Any]]:
    return [
        {"id": one.due.id, "read_fire_at": one.due.next_fire_at,
         "read_updated_at": one.due.updated_at, "missed": one.plan.missed,
         "fired": len(one.to_fire), "skipped": len(one.fires.skipped) + len(one.over_room),
         "last_fired_for": max(one.to_fire, default=None), "now": work.now,
         **next_fire_values(one.due.id, one.due.spec, one.plan.next_nominal)}
        for one in decided
    ]  # fmt: skip


def _missed(due: DueSchedule, plan: FirePlan) -> NewScheduleEvent:
    message = (
        f"{plan.missed} fire(s) missed while no scheduler ran (the last for "
        f"{plan.last_missed:%Y-%m-%d %H:%M:%S} UTC); misfire policy {due.spec.misfire_policy}"
    )
    return NewScheduleEvent(due.id, "missed", message, scheduled_for=plan.last_missed)


def _job_of(found: Mapping[tuple[str, str], Job], due: DueSchedule) -> Job:
    job = found.get((due.tenant_id, due.job_id or ""))
    if job is None:
        raise NotFound(f"job {due.job_id} not found")
    return job


def _over_room(
    due: DueSchedule, nominals: Sequence[datetime], room: QueueRoom
) -> list[NewScheduleEvent]:
    return [
        NewScheduleEvent(due.id, "skipped", f"not fired: {room.reason}", scheduled_for=nominal)
        for nominal in nominals
    ]


def _decide(
    work: Work,
    due: DueSchedule,
    fire_now: Sequence[datetime],
    found: Mapping[tuple[str, str], Job],
    active: Sequence[ActiveRun],
    actor: str,
) -> tuple[Fires, str | None]:
    if not fire_now or due.job_id is None:  # a workflow's fires start after the fence
        return Fires(Changes()), None  # (``start_scheduled``)
    job = _job_of(found, due)
    try:
        spec = scheduled_spec(job, due.spec)
    except Invalid as refused:  # the job changed since: the overrides no longer fit it
        return Fires(Changes()), refused.detail
    new_runs = [
        scheduled_run(work, due, job, spec, nominal, actor,
                      f"fired by schedule {due.id} for {nominal:%Y-%m-%d %H:%M:%S} UTC")
        for nominal in fire_now
    ]  # fmt: skip
    return fire(due.id, due.spec.concurrency_policy, active, new_runs, work.now), None


def scheduled_spec(job: Job, schedule: ScheduleSpec) -> JobSpec:
    """What the schedule's runs of the job run: the job's spec under the schedule's overrides,
    limits and deadline (``Invalid`` where the job changed so that they no longer fit)."""
    spec = apply_overrides(job.spec, schedule.overrides, limits=fielded(schedule.limits))
    if schedule.deadline is not None:  # the schedule's deadline wins over its job's
        spec = spec.model_copy(update={"deadline": schedule.deadline})
    return spec


def scheduled_run(
    work: Work, due: DueSchedule, job: Job, spec: JobSpec, nominal: datetime, actor: str,
    message: str,
) -> NewRun:  # fmt: skip
    """A queued run of the schedule's job for its fire at ``nominal``."""
    run_id = new_id("run", epoch_ms(work.now))
    event = Event(run_id, message, actor, target=RunState.QUEUED)
    fired = Fire(nominal, due.spec.cron, due.spec.timezone)
    return NewRun(run_id, due.tenant_id, job.id, job.name, spec, event,
                  schedule_id=due.id, scheduled_for=nominal,
                  deadline_at=deadline_at(spec.deadline, fired))  # fmt: skip


def _record(
    work: Work,
    decided: Sequence[_Decided],
    made_for: Mapping[str, Sequence[datetime]],
    dropped: Sequence[NewScheduleEvent],
) -> None:
    """The schedules' unusual events (their runs' events record fires); and the counts put
    right where a run was not made: the unique key refused it (its nominal time had one
    already), or a limit's ``drop`` did (``dropped``: skipped, then)."""
    events: list[NewScheduleEvent] = list(dropped)
    skipped = Counter(event.schedule_id for event in dropped)
    recounts: list[dict[str, Any]] = []
    for one in decided:
        if one.plan.missed:
            events.append(_missed(one.due, one.plan))
        if one.refused is not None and one.fire:
            message = f"not fired: its overrides no longer fit job {one.due.job_id}: {one.refused}"
            events.append(NewScheduleEvent(one.due.id, "error", message, max(one.fire)))
        events += [_skipped(one.due, nominal, blocking) for nominal, blocking in one.fires.skipped]
        events += one.over_room
        events += replaced_events(one.due.id, one.fires.replaced)
        made = made_for.get(one.due.id, [])
        if len(made) < len(one.to_fire):
            recounts.append(
                {"id": one.due.id, "refused": len(one.to_fire) - len(made),
                 "skipped": skipped[one.due.id],
                 "last_fired_for": max(filter(None, made), default=one.due.last_fired_for)}
            )  # fmt: skip
    record_schedule_events(work.connection, work.now, events)
    update_rows(work.connection, _RECOUNT_COLUMNS, recounts, _recount)


def _skipped(due: DueSchedule, nominal: datetime, blocking: RunFacts) -> NewScheduleEvent:
    message = (
        f"not fired: run {blocking.id} of this schedule is still {blocking.state} "
        "(concurrency policy forbid)"
    )
    return NewScheduleEvent(due.id, "skipped", message, scheduled_for=nominal)


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
