"""A schedule fired by hand (``POST /v1/schedules/{id}/trigger``), now, in one unit of work:
its job's run or its workflow's run for ``scheduled_for`` = now, as a fire of it — under its
concurrency policy (refused, 409, where ``forbid`` would skip it), its limits and deadline —
paused or not. Its next fire stays as it was; its fired count and events say it fired."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import update

from herder.domain.deadlines import Fire
from herder.domain.errors import Conflict, Invalid
from herder.domain.lifecycle.cancel import Cause
from herder.domain.lifecycle.concurrency import fire_now
from herder.domain.models import TriggeredFire
from herder.domain.workflows.scheduled import started_now
from herder.store.firing import DueSchedule, scheduled_run, scheduled_spec
from herder.store.jobs import JobRepository
from herder.store.runs.facts import active_of_schedule
from herder.store.runs.limit_rooms import by_limits
from herder.store.schedule_events import record_replaced, schedule_event
from herder.store.schema import schedules
from herder.store.work import Work
from herder.store.workflows.scheduled import active_of
from herder.store.workflows.starts import cancel_in, start_in

TAKEN = "the schedule already has a run for this moment; try again"


def trigger(work: Work, jobs: JobRepository, due: DueSchedule, actor: str) -> TriggeredFire:
    if due.workflow_id is None:
        fired = TriggeredFire(schedule_id=due.id, scheduled_for=work.now,
                              run_id=_job_run(work, jobs, due, actor))  # fmt: skip
        what = f"run {fired.run_id}"
    else:
        fired = TriggeredFire(schedule_id=due.id, scheduled_for=work.now,
                              workflow_run_id=_workflow_run(work, due, actor))  # fmt: skip
        what = f"workflow run {fired.workflow_run_id}"
    work.connection.execute(
        update(schedules)
        .where(schedules.c.id == due.id)
        .values(fired_count=schedules.c.fired_count + 1)
    )
    started = fired.run_id or fired.workflow_run_id
    message = f"fired by hand: {what}"
    schedule_event(
        work.connection, due.id, work.now, "triggered", message,
        scheduled_for=work.now, run_id=started,
    )  # fmt: skip
    return fired


def _job_run(work: Work, jobs: JobRepository, due: DueSchedule, actor: str) -> str:
    assert due.job_id is not None
    job = jobs.get_within(work.connection, due.tenant_id, due.job_id)
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
    assert due.workflow_id is not None
    decision = started_now(due.id, due.spec.concurrency_policy, active_of(work, due.id), work.now)
    cause = Cause(actor, f"replaced by a newer run of schedule {due.id}")
    for replaced_id in decision.replaced:
        cancel_in(work, replaced_id, cause)
    record_replaced(work, due.id, decision.replaced)
    run_id = start_in(
        work, due.tenant_id, due.workflow_id, {}, schedule_id=due.id,
        scheduled_for=work.now, schedule_deadline=due.spec.deadline,
        fired=Fire(work.now, due.spec.cron, due.spec.timezone),
    )  # fmt: skip
    if run_id is None:
        raise Conflict(TAKEN)
    return run_id
