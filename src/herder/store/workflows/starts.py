"""Starting and cancelling a workflow run inside a caller's unit of work — a user's start,
a schedule's fire, a backfill's step — and what a start checks: the parameters, the jobs it
pins, the workflow's ``max_active_runs`` (and what admitting queued runs reads). What a
start or cancel leaves to move on is noted on the unit of work's worklist (``Work.follow``)
for the use case's drain (``app.follow_ups``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, func, select

from herder.clock import epoch_ms
from herder.domain.deadlines import Deadline, Fire, deadline_at
from herder.domain.errors import Invalid, NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec
from herder.domain.lifecycle.cancel import Cause, cancel_all
from herder.domain.lifecycle.changes import Changes, NewWorkflowRun
from herder.domain.states import ACTIVE_RUN_STATES
from herder.domain.workflows.admission import SLOT_HOLDING, admission, admitted_at_most
from herder.domain.workflows.cancel import cancel_workflow_run
from herder.domain.workflows.run_bound import check_run_bound
from herder.domain.workflows.spec import TaskSpec, WorkflowSpec, check_params
from herder.domain.workflows.states import ACTIVE_WORKFLOW_RUN_STATES, WorkflowRunState
from herder.domain.workflows.task_runs import task_run_spec
from herder.domain.workflows.waits import until_instant
from herder.store.runs.facts import cancellable_runs
from herder.store.schema import runs, workflow_runs, workflows
from herder.store.unit import Work
from herder.store.workflows.definitions import check_jobs, spec_of
from herder.store.workflows.progress import lock


@dataclass(frozen=True)
class Admission:
    capacity: int | None
    holding: int
    queued: list[str]


def workflow_row(connection: Connection, tenant_id: str, workflow_id: str) -> Any:
    return connection.execute(
        select(workflows)
        .where(workflows.c.tenant_id == tenant_id, workflows.c.id == workflow_id)
        .with_for_update()
    ).first()


def start_in(
    work: Work,
    tenant_id: str,
    workflow_id: str,
    params: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    schedule_id: str | None = None,
    scheduled_for: datetime | None = None,
    backfill_id: str | None = None,
    fired: Fire | None = None,
    schedule_deadline: Deadline | None = None,
    created_by: str | None,
) -> str | None:
    """Start a run of the workflow's current version inside ``work``: its first tasks are
    queued in the same transaction; under ``max_active_runs`` it queues, or is refused
    (``forbid``, 409). None when a unique key (idempotency key, or schedule and nominal
    time) already has a run.

    Its deadline is the schedule's, else the workflow's: from the schedule's ``fired``
    nominal time, else from now. A backfill's runs catch up on the past and have none.
    ``created_by``: who starts it (``domain.actors``); its task runs inherit it."""
    workflow = workflow_row(work.connection, tenant_id, workflow_id)
    if workflow is None:
        raise NotFound(f"workflow {workflow_id} not found")
    spec = spec_of(work.connection, workflow.id, workflow.version)
    values = check_params(spec, params)
    check_run_bound(spec, values)
    pinned = _pinned_jobs(work.connection, tenant_id, spec, values)
    active = (  # counted only where a bound asks for it: most workflows have none
        0
        if spec.max_active_runs is None
        else active_count(work.connection, workflow.id, *ACTIVE_WORKFLOW_RUN_STATES)
    )
    deadline = None if backfill_id is not None else schedule_deadline or spec.deadline
    new = NewWorkflowRun(
        id=new_id("wfrun", epoch_ms(work.now)),
        tenant_id=tenant_id,
        workflow_id=workflow.id,
        workflow_name=workflow.name,
        version=workflow.version,
        state=admission(spec.max_active_runs, spec.concurrency, active),
        params=values,
        jobs=pinned,
        idempotency_key=idempotency_key,
        schedule_id=schedule_id,
        scheduled_for=scheduled_for,
        backfill_id=backfill_id,
        deadline=None if deadline is None else deadline.model_dump(mode="json"),
        deadline_at=deadline_at(deadline, fired or work.now),
        created_by=created_by,
    )
    if new.id not in work.apply(Changes(new_workflow_runs=(new,))).workflow_runs_inserted:
        return None
    if new.state is WorkflowRunState.RUNNING:
        work.follow(workflow_run=new.id)  # its first tasks start in the drain
    return new.id


def cancel_in(work: Work, workflow_run_id: str, cause: Cause) -> None:
    """Cancel an active workflow run inside ``work`` (see ``app.workflows.cancel``)."""
    row = lock(work.connection, workflow_run_id)
    state = WorkflowRunState(row.state)
    work.apply(cancel_workflow_run(workflow_run_id, state, work.now))
    if state is WorkflowRunState.QUEUED:
        return
    active = select(runs.c.id).where(
        runs.c.workflow_run_id == workflow_run_id, runs.c.state.in_(sorted(ACTIVE_RUN_STATES))
    )
    why = Cause(cause.actor, cause.why or f"its workflow run {workflow_run_id} was cancelled")
    # One decision for all its runs, applied set-based: a few statements for a fan-out of
    # thousands, and the workflow run moved on once, not once a run.
    found, workers = cancellable_runs(work.connection, active)
    if not work.apply(cancel_all(found, workers, why, work.now)).moved:
        work.follow(workflow_run=workflow_run_id)  # else the runs' ends move it on


def _pinned_jobs(
    connection: Connection, tenant_id: str, spec: WorkflowSpec, params: dict[str, Any]
) -> dict[str, Any]:
    """The jobs the run will run, as they are now (the run keeps them as they were), each
    task's spec checked with the parameters so no task can fail on its spec later."""
    found = check_jobs(connection, tenant_id, spec)
    jobs = {name: JobSpec.model_validate(row.spec) for name, row in found.items()}
    for position, task in enumerate(spec.tasks):
        if task.job is None:
            _check_waiting(task, params, position)
            continue
        try:
            task_run_spec(jobs[task.job], task, params)
        except ValidationError as error:
            problem = error.errors(include_url=False)[0]
            raise Invalid(
                f"task {task.name!r} cannot run with these parameters: {problem['msg']}",
                field=f"tasks.{position}" if not params else "params",
            ) from error
        except Invalid as error:  # a variable no override may set, a parameter that misfits
            name = (error.field or "").partition(".")[2]
            field = (
                f"params.{name}"
                if name in params
                else f"tasks.{position}.{error.field}"
                if (error.field or "").startswith("limits")
                else f"tasks.{position}.overrides.{error.field}"
            )
            raise Invalid(f"task {task.name!r}: {error.detail}", field=field) from error
    return {name: {"id": row.id, "spec": row.spec} for name, row in found.items()}


def _check_waiting(task: TaskSpec, params: dict[str, Any], position: int) -> None:
    """A wait until ``params.NAME`` is refused at the start when the parameter holds no
    instant, not when the task is reached."""
    if task.wait is not None:
        try:
            until_instant(task.wait, params)
        except ValueError as error:
            raise Invalid(
                f"task {task.name!r}: {error}", field=f"tasks.{position}.wait.until"
            ) from None


def admission_facts(connection: Connection, workflow_id: str) -> Admission | None:
    """What admitting the workflow's queued runs reads: its ``max_active_runs``, the runs
    holding a slot, the oldest queued that could take one. Its row is locked, so two runs
    ending at once admit one run each; None for a deleted workflow (nothing of it is
    queued: a delete waits for its runs to end)."""
    spec = connection.execute(
        select(workflows.c.spec).where(workflows.c.id == workflow_id).with_for_update()
    ).scalar()
    if spec is None:
        return None
    capacity = spec.get("max_active_runs")
    holding = active_count(connection, workflow_id, *SLOT_HOLDING)
    queued = connection.execute(
        select(workflow_runs.c.id)
        .where(
            workflow_runs.c.workflow_id == workflow_id,
            workflow_runs.c.state == WorkflowRunState.QUEUED,
        )
        .order_by(workflow_runs.c.id)
        .limit(admitted_at_most(capacity))
    ).scalars()
    return Admission(capacity, holding, list(queued))


def active_count(connection: Connection, workflow_id: str, *states: WorkflowRunState) -> int:
    return int(
        connection.execute(
            select(func.count())
            .select_from(workflow_runs)
            .where(
                workflow_runs.c.workflow_id == workflow_id,
                workflow_runs.c.state.in_([str(state) for state in states]),
            )
        ).scalar_one()
    )


def backfill_of(connection: Connection, workflow_run_id: str) -> tuple[str, str | None]:
    """The workflow of a workflow run, and the backfill that made it (None: none did)."""
    row = connection.execute(
        select(workflow_runs.c.workflow_id, workflow_runs.c.backfill_id).where(
            workflow_runs.c.id == workflow_run_id
        )
    ).one()
    return row.workflow_id, row.backfill_id
