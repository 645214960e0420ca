"""A schedule's fires of a workflow, inside the firer's unit of work and after its fence:
one workflow run per nominal time (the unique key (schedule, nominal time) makes a repeat
nothing), under the schedule's concurrency policy and the workflow's ``max_active_runs``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from sqlalchemy import select, update

from herder.domain.actors import schedule_actor
from herder.domain.deadlines import Fire
from herder.domain.errors import Conflict, Invalid
from herder.domain.lifecycle.cancel import Cause
from herder.domain.schedules import ScheduleSpec
from herder.domain.workflows.scheduled import scheduled_starts
from herder.domain.workflows.states import ACTIVE_WORKFLOW_RUN_STATES
from herder.store.schedule_events import (
    NewScheduleEvent,
    record_schedule_events,
    replaced_events,
)
from herder.store.schema import schedules, workflow_runs
from herder.store.unit import Work
from herder.store.workflows.starts import cancel_in, start_in


class DueSchedule(Protocol):
    """A due schedule of a workflow as the firer read it (``store.schedule_fires.DueSchedule``)."""

    @property
    def id(self) -> str: ...
    @property
    def tenant_id(self) -> str: ...
    @property
    def workflow_id(self) -> str | None: ...
    @property
    def spec(self) -> ScheduleSpec: ...


def start_scheduled(
    work: Work, due: DueSchedule, nominals: Sequence[datetime], actor: str
) -> list[datetime]:
    """Start the runs of these fires; the nominal times a run was made for."""
    assert due.workflow_id is not None
    decision = scheduled_starts(due.spec.concurrency_policy, active_of(work, due.id), nominals)
    cause = Cause(actor, f"replaced by a newer run of schedule {due.id}")
    for replaced in decision.replaced:
        cancel_in(work, replaced, cause)
    events = replaced_events(due.id, decision.replaced)
    made: list[datetime] = []
    for nominal in decision.start:
        try:
            run_id = start_in(
                work, due.tenant_id, due.workflow_id, {}, schedule_id=due.id,
                scheduled_for=nominal, schedule_deadline=due.spec.deadline,
                fired=Fire(nominal, due.spec.cron, due.spec.timezone),
                created_by=schedule_actor(due.id),
            )  # fmt: skip
        except (Conflict, Invalid) as refused:  # max_active_runs under forbid; run bound
            events.append(_skip(due, nominal, refused.detail))
            continue
        if run_id is not None:
            made.append(nominal)
            message = f"started workflow run {run_id} for {nominal:%Y-%m-%d %H:%M:%S} UTC"
            events.append(NewScheduleEvent(due.id, "fired", message, nominal, run_id))
    for nominal, blocking in decision.skipped:
        which = f"run {blocking}" if blocking else "the run started for an earlier fire"
        events.append(_skip(due, nominal, f"{which} of this schedule is still active "
                            "(concurrency policy forbid)"))  # fmt: skip
    skipped = sum(event.kind == "skipped" for event in events)
    if skipped:
        work.connection.execute(
            update(schedules)
            .where(schedules.c.id == due.id)
            .values(skipped_count=schedules.c.skipped_count + skipped)
        )
    record_schedule_events(work.connection, work.now, events)
    return made


def active_of(work: Work, schedule_id: str) -> list[str]:
    """The schedule's workflow runs not yet ended, oldest first."""
    return list(
        work.connection.execute(
            select(workflow_runs.c.id)
            .where(
                workflow_runs.c.schedule_id == schedule_id,
                workflow_runs.c.state.in_(sorted(ACTIVE_WORKFLOW_RUN_STATES)),
            )
            .order_by(workflow_runs.c.id)
        ).scalars()
    )


def _skip(due: DueSchedule, nominal: datetime, why: str) -> NewScheduleEvent:
    return NewScheduleEvent(due.id, "skipped", f"not fired: {why}", scheduled_for=nominal)
