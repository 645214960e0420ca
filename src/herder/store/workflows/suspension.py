"""Suspending and resuming a workflow run inside a unit of work (``domain.workflows.suspend``):
the workflow run's move and its task runs' — one decision for all of them, applied
set-based (``lifecycle.suspend``), as a cancel is (``starts.cancel_in``)."""

from __future__ import annotations

from sqlalchemy import Connection, Select, func, select

from herder.domain.lifecycle.suspend import Suspendable, resume_all, suspend_all
from herder.domain.queue_room import RELEASER
from herder.domain.states import SUSPENDABLE_RUN_STATES, RunState
from herder.domain.workflows.states import WorkflowRunState
from herder.domain.workflows.suspend import resume_workflow_run, suspend_workflow_run
from herder.store.queue_room import release_held
from herder.store.runs.facts import workers_running
from herder.store.schema import runs
from herder.store.unit import Work
from herder.store.workflows.progress import lock


def suspend_in(work: Work, workflow_run_id: str, actor: str) -> None:
    """Suspend a running workflow run and its active task runs (a suspended one is left as
    it is)."""
    row = lock(work.connection, workflow_run_id)
    state = WorkflowRunState(row.state)
    changes = suspend_workflow_run(workflow_run_id, state, row.cancel_requested, work.now)
    if changes.empty:
        return
    work.apply(changes)
    active = select(runs.c.id).where(
        runs.c.workflow_run_id == workflow_run_id,
        runs.c.state.in_(sorted(SUSPENDABLE_RUN_STATES)),
    )
    found, workers = suspendable_runs(work.connection, active)
    work.apply(suspend_all(found, workers, actor, work.now))


def resume_in(work: Work, workflow_run_id: str, actor: str) -> None:
    """Resume a suspended workflow run: its suspended task runs queued again (held past the
    tenant's ``max_queued``), then the walk starts what became ready meanwhile — or ends it,
    when every task has ended."""
    row = lock(work.connection, workflow_run_id)
    stopping = work.connection.execute(
        select(func.count()).where(
            runs.c.workflow_run_id == workflow_run_id,
            runs.c.state == RunState.RUNNING,
            runs.c.suspend_requested,
        )
    ).scalar_one()
    state = WorkflowRunState(row.state)
    work.apply(resume_workflow_run(workflow_run_id, state, stopping, work.now))
    suspended = (
        work.connection.execute(
            select(runs.c.id)
            .where(runs.c.workflow_run_id == workflow_run_id, runs.c.state == RunState.SUSPENDED)
            .order_by(runs.c.id)
        )
        .scalars()
        .all()
    )
    room = release_held(work, row.tenant_id, actor=RELEASER)
    work.apply(resume_all(suspended, room, actor, work.now))
    work.follow(workflow_run=workflow_run_id)  # what became ready meanwhile starts


def suspendable_runs(
    connection: Connection, run_ids: Select[tuple[str]]
) -> tuple[list[Suspendable], set[str]]:
    """The runs of a set suspended at once (a query of their ids), locked in id order as a
    set's cancel locks them (``runs.facts.cancellable_runs``), and the workers running any
    of them: only the columns the suspend reads, whatever the set."""
    rows = connection.execute(
        select(
            runs.c.id, runs.c.state, runs.c.attempt_count, runs.c.cancel_requested,
            runs.c.suspend_requested,
        )
        .where(runs.c.id.in_(run_ids))
        .order_by(runs.c.id)
        .with_for_update(key_share=True)
    ).all()  # fmt: skip
    found = [
        Suspendable(row.id, RunState(row.state), row.attempt_count, row.cancel_requested,
                    row.suspend_requested)
        for row in rows
    ]  # fmt: skip
    running = [run.id for run in found if run.state is RunState.RUNNING]
    return found, workers_running(connection, running)
