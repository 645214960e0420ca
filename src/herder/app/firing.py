"""Schedules fired: a batch of due ones by a firer (``fire``), one by hand (``trigger``).

A batch is one unit of work, set-based — a few statements per batch, whatever its size: the
cost is in proportion to the schedules due (docs/design.md §4).

    read      the jobs in one query; the active runs of forbid/replace schedules in one; the
              room under each tenant's ``max_queued`` (its row held: ``store.queue_room``)
    decide    pure: the fires the room takes (the rest are skipped and recorded), each
              schedule's runs under its concurrency policy (``domain.lifecycle.concurrency``)
    advance   one guarded UPDATE: each schedule moves on, with its counters, only if it is
              still as it was read (``store.schedule_fires.advance``: the fence); one fired
              meanwhile by another firer, or changed, fires nothing
    apply     the runs of the schedules advanced, under their limits, and their events
              inserted, replaced runs cancelled (``Work.apply``); the unique key (schedule,
              nominal time) makes a repeat insert nothing; a workflow's fires start its runs
    record    one INSERT of "missed", "skipped" and "replaced" events; the counters of a
              schedule whose run the unique key or a limit refused are put right
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from herder.app.work import unit_of_work
from herder.domain.actors import schedule_actor
from herder.domain.deadlines import Fire
from herder.domain.errors import Conflict, Invalid, NotFound
from herder.domain.lifecycle.cancel import Cause
from herder.domain.lifecycle.changes import Changes, combine
from herder.domain.lifecycle.concurrency import Fires, fire, fire_now
from herder.domain.lifecycle.facts import ActiveRun, RunFacts
from herder.domain.models import Job, TriggeredFire
from herder.domain.queue_room import UNLIMITED, QueueRoom
from herder.domain.schedules import ConcurrencyPolicy, FirePlan, jitter_offset
from herder.domain.workflows.scheduled import started_now
from herder.store.queue_room import queue_rooms
from herder.store.runs.facts import active_of_schedule, active_of_schedules
from herder.store.runs.limit_rooms import by_limits
from herder.store.schedule_events import (
    NewScheduleEvent,
    record_replaced,
    record_schedule_events,
    replaced_events,
)
from herder.store.schedule_fires import (
    Advance,
    DueSchedule,
    Recount,
    advance,
    record_triggered,
    recount,
    scheduled_run,
    scheduled_spec,
)
from herder.store.store import Store
from herder.store.work import Work
from herder.store.workflows.scheduled import active_of, start_scheduled
from herder.store.workflows.starts import cancel_in, start_in
from herder.telemetry import metrics

_NEEDS_ACTIVE = (ConcurrencyPolicy.FORBID, ConcurrencyPolicy.REPLACE)
TAKEN = "the schedule already has a run for this moment; try again"


def fire_due(store: Store, batch: Sequence[tuple[DueSchedule, FirePlan]], *, actor: str) -> int:
    """Apply each plan once, in one unit of work (the stages in the module's docstring);
    the runs made."""
    with unit_of_work(store) as work:
        # read
        firing = [(due, plan) for due, plan in batch if plan.fire and due.job_id is not None]
        found = store.jobs.get_many_within(
            work.connection, {(due.tenant_id, due.job_id) for due, _ in firing if due.job_id}
        )
        active = active_of_schedules(
            work.connection,
            [due.id for due, _ in firing if due.spec.concurrency_policy in _NEEDS_ACTIVE],
        )
        rooms = queue_rooms(work, {due.tenant_id for due, plan in batch if plan.fire}, wait=True)
        # decide: each tenant's room taken in the batch's order
        decided = []
        for due, plan in batch:
            room = rooms.get(due.tenant_id, UNLIMITED)
            fire_now, past_room = room.split(plan.fire)
            fires, refused = _decide(work, due, fire_now, found, active.get(due.id, []), actor)
            taking = len(fire_now) if due.workflow_id is not None else len(fires.changes.new_runs)
            rooms[due.tenant_id] = room.taken(taking)
            over_room = _over_room(due, past_room, room)
            decided.append(_Decided(due, plan, fires, fire_now, over_room, refused))
        # advance: only the schedules still as read fire
        advanced = advance(work, [one.advance for one in decided])
        decided = [one for one in decided if one.due.id in advanced]
        # apply
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
        # record
        _record(work, decided, made, dropped)
        due_times, missed = _due_times(decided, made), sum(one.plan.missed for one in decided)
        work.after_commit.append(lambda: metrics.schedules_fired(work.now, due_times, missed))
    return sum(len(nominals) for nominals in made.values())


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

    @property
    def advance(self) -> Advance:
        """The schedule moved on, counting what was decided for it."""
        skipped = len(self.fires.skipped) + len(self.over_room)
        return Advance(self.due, self.plan.next_nominal, self.plan.missed, len(self.to_fire),
                       skipped, max(self.to_fire, default=None))  # fmt: skip


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
                      f"fired by schedule {due.id} for {nominal:%Y-%m-%d %H:%M:%S} UTC",
                      created_by=schedule_actor(due.id))
        for nominal in fire_now
    ]  # fmt: skip
    return fire(due.id, due.spec.concurrency_policy, active, new_runs, work.now), None


def _job_of(found: Mapping[tuple[str, str], Job], due: DueSchedule) -> Job:
    job = found.get((due.tenant_id, due.job_id or ""))
    if job is None:
        raise NotFound(f"job {due.job_id} not found")
    return job


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
    recounts: list[Recount] = []
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
            last = max(filter(None, made), default=one.due.last_fired_for)
            recounts.append(Recount(one.due.id, len(one.to_fire) - len(made),
                                    skipped[one.due.id], last))  # fmt: skip
    record_schedule_events(work.connection, work.now, events)
    recount(work.connection, recounts)


def _due_times(
    decided: Sequence[_Decided], made_for: Mapping[str, Sequence[datetime]]
) -> Iterator[datetime]:
    """When each run made was due: its nominal time plus its schedule's jitter."""
    for one in decided:
        offset = jitter_offset(one.due.id, one.due.spec.jitter_seconds)
        for nominal in made_for.get(one.due.id, []):
            yield nominal + offset


def _missed(due: DueSchedule, plan: FirePlan) -> NewScheduleEvent:
    message = (
        f"{plan.missed} fire(s) missed while no scheduler ran (the last for "
        f"{plan.last_missed:%Y-%m-%d %H:%M:%S} UTC); misfire policy {due.spec.misfire_policy}"
    )
    return NewScheduleEvent(due.id, "missed", message, scheduled_for=plan.last_missed)


def _over_room(
    due: DueSchedule, nominals: Sequence[datetime], room: QueueRoom
) -> list[NewScheduleEvent]:
    return [
        NewScheduleEvent(due.id, "skipped", f"not fired: {room.reason}", scheduled_for=nominal)
        for nominal in nominals
    ]


def _skipped(due: DueSchedule, nominal: datetime, blocking: RunFacts) -> NewScheduleEvent:
    message = (
        f"not fired: run {blocking.id} of this schedule is still {blocking.state} "
        "(concurrency policy forbid)"
    )
    return NewScheduleEvent(due.id, "skipped", message, scheduled_for=nominal)


def trigger(store: Store, tenant_id: str, schedule_id: str, *, actor: str) -> TriggeredFire:
    """Fire it now, by hand (``POST /v1/schedules/{id}/trigger``), in one unit of work: its
    job's run or its workflow's run for ``scheduled_for`` = now, as a fire of it — under its
    concurrency policy (refused, 409, where ``forbid`` would skip it), its limits and
    deadline — paused or not. Its row is held, so two at once take turns under its policy;
    its next fire stays as it was; its fired count and events say it fired."""
    with unit_of_work(store) as work:
        due = store.schedules.due_within(work.connection, tenant_id, schedule_id)
        if due.workflow_id is None:
            started = _job_run(store, work, due, actor)
            fired = TriggeredFire(schedule_id=due.id, scheduled_for=work.now, run_id=started)
            what = f"run {started}"
        else:
            started = _workflow_run(work, due, actor)
            fired = TriggeredFire(schedule_id=due.id, scheduled_for=work.now,
                                  workflow_run_id=started)  # fmt: skip
            what = f"workflow run {started}"
        record_triggered(work, due.id, started, what)
        return fired


def _job_run(store: Store, work: Work, due: DueSchedule, actor: str) -> str:
    """The schedule's job's run for now: read, decided under its policy and limits, applied."""
    assert due.job_id is not None
    job = store.jobs.get_within(work.connection, due.tenant_id, due.job_id)
    try:
        spec = scheduled_spec(job, due.spec)
    except Invalid as refused:
        raise Conflict(f"its overrides no longer fit job {job.name}: {refused.detail}") from None
    message = f"fired by hand from schedule {due.id}"
    new = scheduled_run(work, due, job, spec, work.now, actor, message)
    active = active_of_schedule(work.connection, due.id)
    fires = fire_now(due.id, due.spec.concurrency_policy, active, new, work.now)
    limited = by_limits(work.connection, fires.changes.new_runs, work.now)
    refusal = limited.refusal(new.id)
    if refusal is not None:
        raise refusal
    record_replaced(work, due.id, fires.replaced)
    changes = replace(fires.changes, new_runs=limited.new_runs) + limited.changes
    if new.id not in work.apply(changes).inserted:
        raise Conflict(TAKEN)
    return new.id


def _workflow_run(work: Work, due: DueSchedule, actor: str) -> str:
    """The schedule's workflow's run for now, the active one replaced where its policy says."""
    assert due.workflow_id is not None
    decision = started_now(due.id, due.spec.concurrency_policy, active_of(work, due.id), work.now)
    cause = Cause(actor, f"replaced by a newer run of schedule {due.id}")
    for replaced_id in decision.replaced:
        cancel_in(work, replaced_id, cause)
    record_replaced(work, due.id, decision.replaced)
    run_id = start_in(
        work, due.tenant_id, due.workflow_id, {}, schedule_id=due.id,
        scheduled_for=work.now, schedule_deadline=due.spec.deadline,
        fired=Fire(work.now, due.spec.cron, due.spec.timezone), created_by=actor,
    )  # fmt: skip
    if run_id is None:
        raise Conflict(TAKEN)
    return run_id
