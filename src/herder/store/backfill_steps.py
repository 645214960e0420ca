"""A backfill's step (``domain.backfills``), inside the unit of work that created it or ended
one of its runs: the next nominal times start while fewer than ``max_active`` of its runs are
active, each once (the schedule's unique key), at ``low`` priority; past the tenant's
``max_queued`` its runs are held ``pending`` until there is room (``domain.queue_room``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, func, select

from herder.clock import epoch_ms
from herder.domain.backfills import BackfillState
from herder.domain.cron import CronExpression, fires_between, parse_timezone
from herder.domain.errors import Invalid, NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec, Priority, apply_overrides
from herder.domain.lifecycle.changes import WORK, Changes, Event, NewRun, backfill_transition
from herder.domain.queue_room import RELEASER, QueueRoom, hold
from herder.domain.schedules import ScheduleSpec
from herder.domain.states import RunState
from herder.domain.workflows.progress import WorkflowRunState
from herder.store.queue_room import queue_room, room_after_release
from herder.store.runs.facts import ACTIVE_STATES
from herder.store.schema import backfills, jobs, runs, schedules, workflow_runs
from herder.store.workflows.starts import start_in

if TYPE_CHECKING:
    from herder.store.work import Work

_SEARCHED = 1000  # nominal times looked at per search, so one step stays short


def compiled(schedule: Any) -> tuple[CronExpression, Any, ScheduleSpec]:
    spec = ScheduleSpec.model_validate(schedule.spec)
    expression = CronExpression.parse(spec.cron, allow_seconds=True)
    return expression, parse_timezone(spec.timezone), spec


def advance_backfill(work: Work, backfill_id: str) -> None:
    """Start the backfill's next nominal times while fewer than ``max_active`` of its runs
    are active; finish it once the range is done and none is active."""
    backfill = work.connection.execute(
        select(backfills).where(backfills.c.id == backfill_id).with_for_update()
    ).first()
    if backfill is None or BackfillState(backfill.state) is not BackfillState.RUNNING:
        return
    schedule = work.connection.execute(
        select(schedules).where(schedules.c.id == backfill.schedule_id)
    ).first()
    room = room_after_release(work, backfill.tenant_id, actor=RELEASER)
    free = backfill.max_active - _active(work.connection, backfill)
    cursor, started, already = backfill.cursor or backfill.start, 0, 0
    exhausted = schedule is None
    refused = False
    if schedule is not None and free > 0:
        expression, zone, spec = compiled(schedule)
        try:
            while started < free:
                nominals = fires_between(expression, zone, cursor, backfill.end, _SEARCHED)
                if not nominals:
                    exhausted = True
                    break
                for nominal in nominals:
                    cursor = nominal
                    made, room = _start(work, backfill, schedule, spec, nominal, room)
                    if made:
                        started += 1
                        if started == free:
                            break
                    else:
                        already += 1
        except Invalid:  # its job changed since: the schedule's overrides no longer fit it
            refused = True
    target = BackfillState.RUNNING
    if refused:
        target = BackfillState.CANCELLED
    elif exhausted and _active(work.connection, backfill) == 0:
        target = BackfillState.FINISHED
    step = backfill_transition(
        backfill_id, BackfillState.RUNNING, target, work.now,
        cursor=cursor if cursor != backfill.start else backfill.cursor,
        started=backfill.started + started, already_run=backfill.already_run + already,
    )  # fmt: skip
    work.apply(Changes(backfill_moves=(step,)))


def _active(connection: Connection, backfill: Any) -> int:
    table, states = (
        (runs, ACTIVE_STATES)
        if _of_job(connection, backfill)
        else (workflow_runs, [WorkflowRunState.QUEUED, WorkflowRunState.RUNNING])
    )
    return int(
        connection.execute(
            select(func.count())
            .select_from(table)
            .where(table.c.backfill_id == backfill.id, table.c.state.in_(list(states)))
        ).scalar_one()
    )


def _of_job(connection: Connection, backfill: Any) -> bool:
    job_id = connection.execute(
        select(schedules.c.job_id).where(schedules.c.id == backfill.schedule_id)
    ).scalar()
    return job_id is not None


def job_run_spec(connection: Connection, schedule: Any, spec: ScheduleSpec) -> tuple[Any, JobSpec]:
    """The schedule's job and the spec its runs get (``Invalid`` where the schedule's
    overrides no longer fit the job)."""
    job = connection.execute(select(jobs).where(jobs.c.id == schedule.job_id)).first()
    if job is None:
        raise NotFound(f"job {schedule.job_id} of schedule {schedule.id} no longer exists")
    return job, apply_overrides(JobSpec.model_validate(job.spec), spec.overrides, "overrides.")


def _start(
    work: Work, backfill: Any, schedule: Any, spec: ScheduleSpec, nominal: datetime,
    room: QueueRoom,
) -> tuple[bool, QueueRoom]:  # fmt: skip
    """A run for this nominal time, unless it has one already (held past the tenant's
    ``max_queued``: its tasks, a workflow run's); the room left."""
    if schedule.workflow_id is not None:
        run_id = start_in(
            work, backfill.tenant_id, schedule.workflow_id, {}, schedule_id=schedule.id,
            scheduled_for=nominal, backfill_id=backfill.id,
        )  # fmt: skip
        return run_id is not None, queue_room(work, backfill.tenant_id)
    job, run_spec = job_run_spec(work.connection, schedule, spec)
    run_id = new_id("run", epoch_ms(work.now))
    message = (
        f"backfill {backfill.id} of schedule {schedule.id} for {nominal:%Y-%m-%d %H:%M:%S} UTC"
    )
    new = NewRun(
        run_id, backfill.tenant_id, job.id, job.name,
        run_spec.model_copy(update={"priority": Priority.LOW}),
        Event(run_id, message, f"backfill:{backfill.id}", target=RunState.QUEUED),
        schedule_id=schedule.id, scheduled_for=nominal, backfill_id=backfill.id,
    )  # fmt: skip
    (new,), left = hold([new], room)
    notices = frozenset({WORK}) if new.state is RunState.QUEUED else frozenset()
    inserted = run_id in work.apply(Changes(new_runs=(new,), notices=notices)).inserted
    return inserted, left if inserted else room
