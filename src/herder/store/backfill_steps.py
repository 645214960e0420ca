"""What a backfill's step (``app.follow_ups.step_backfill``, ``domain.backfills``) reads and
writes, inside the unit of work that created it or ended one of its runs: its schedule
compiled, its active runs counted, and its next nominal times started — each once (the
schedule's unique key), at ``low`` priority; past the tenant's ``max_queued`` its runs are
held ``pending`` until there is room (``domain.queue_room``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select

from herder.clock import epoch_ms
from herder.domain.actors import backfill_actor
from herder.domain.backfills import BackfillState, backfill_job_runs
from herder.domain.cron import CronExpression, parse_timezone
from herder.domain.errors import NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec
from herder.domain.lifecycle.changes import WORK, Changes
from herder.domain.limits import fielded
from herder.domain.overrides import apply_overrides
from herder.domain.queue_room import QueueRoom, hold
from herder.domain.schedules import ScheduleSpec
from herder.domain.states import ACTIVE_RUN_STATES, RunState
from herder.domain.workflows.states import ACTIVE_WORKFLOW_RUN_STATES
from herder.store.queue_room import queue_room
from herder.store.schema import backfills, jobs, runs, schedules, workflow_runs
from herder.store.unit import Work
from herder.store.workflows.starts import start_in


def compiled(schedule: Any) -> tuple[CronExpression, Any, ScheduleSpec]:
    spec = ScheduleSpec.model_validate(schedule.spec)
    expression = CronExpression.parse(spec.cron, allow_seconds=True)
    return expression, parse_timezone(spec.timezone), spec


def backfill_to_step(connection: Connection, backfill_id: str) -> tuple[Any, Any] | None:
    """A running backfill's row, locked (two of its runs ending at once step it in turn),
    and its schedule's (None: deleted since); None for one that is not running."""
    row = connection.execute(
        select(backfills).where(backfills.c.id == backfill_id).with_for_update()
    ).first()
    if row is None or BackfillState(row.state) is not BackfillState.RUNNING:
        return None
    schedule = connection.execute(select(schedules).where(schedules.c.id == row.schedule_id))
    return row, schedule.first()


def active_of(connection: Connection, backfill: Any, schedule: Any) -> int:
    of_job = schedule is not None and schedule.job_id is not None
    table, states = (
        (runs, ACTIVE_RUN_STATES) if of_job else (workflow_runs, ACTIVE_WORKFLOW_RUN_STATES)
    )
    return int(
        connection.execute(
            select(func.count())
            .select_from(table)
            .where(table.c.backfill_id == backfill.id, table.c.state.in_(sorted(states)))
        ).scalar_one()
    )


def job_run_spec(connection: Connection, schedule: Any, spec: ScheduleSpec) -> tuple[Any, JobSpec]:
    """The schedule's job and the spec its runs get (``Invalid`` where the schedule's
    overrides no longer fit the job)."""
    job = connection.execute(select(jobs).where(jobs.c.id == schedule.job_id)).first()
    if job is None:
        raise NotFound(f"job {schedule.job_id} of schedule {schedule.id} no longer exists")
    return job, apply_overrides(
        JobSpec.model_validate(job.spec), spec.overrides, "overrides.", fielded(spec.limits)
    )


def start_times(
    work: Work, backfill: Any, schedule: Any, spec: ScheduleSpec, nominals: list[datetime],
    room: QueueRoom,
) -> tuple[int, QueueRoom]:  # fmt: skip
    """A run for each of these nominal times that has none yet (held past the tenant's
    ``max_queued``: its tasks, a workflow run's); how many were made, and the room left."""
    if not nominals:
        return 0, room
    if schedule.workflow_id is not None:
        made = 0
        for nominal in nominals:
            run_id = start_in(
                work, backfill.tenant_id, schedule.workflow_id, {}, schedule_id=schedule.id,
                scheduled_for=nominal, backfill_id=backfill.id,
                created_by=backfill_actor(backfill.id),
            )  # fmt: skip
            made += run_id is not None
        return made, queue_room(work, backfill.tenant_id)
    job, run_spec = job_run_spec(work.connection, schedule, spec)
    made = 0
    # One time at a time: a time that already has a run inserts nothing and takes no room.
    for new in backfill_job_runs(
        backfill.id, backfill.tenant_id, schedule.id, (job.id, job.name, run_spec), nominals,
        lambda: new_id("run", epoch_ms(work.now)),
    ):  # fmt: skip
        (held,), left = hold([new], room)
        notices = frozenset({WORK}) if held.state is RunState.QUEUED else frozenset()
        if held.id in work.apply(Changes(new_runs=(held,), notices=notices)).inserted:
            made, room = made + 1, left
    return made, room
