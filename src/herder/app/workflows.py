"""A user's moves on a workflow run: start one (under an idempotency key and the workflow's
``max_active_runs``), cancel, suspend, resume, repair in place, decide an approval task.
Each one use case in one unit of work: read (the workflow run locked), decide, apply, follow
up (its ready tasks start, a freed slot admits the next), answer with the run as it is
after."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from herder.app.follow_ups import follow_up
from herder.app.work import unit_of_work
from herder.domain.errors import Conflict
from herder.domain.lifecycle.cancel import Cause
from herder.domain.models import Principal
from herder.domain.workflows.models import WorkflowRun, WorkflowRunDetail
from herder.domain.workflows.repair import RepairFacts, RepairRequest, repair
from herder.domain.workflows.states import WorkflowRunState
from herder.domain.workflows.walk import current_runs, tallied_board
from herder.store.store import Store
from herder.store.workflows.definitions import spec_of
from herder.store.workflows.progress import lock, tallies_of
from herder.store.workflows.runs import (
    by_idempotency_key,
    lock_workflow,
    read_workflow_run,
    workflow_run,
)
from herder.store.workflows.starts import cancel_in, start_in
from herder.store.workflows.suspension import resume_in, suspend_in
from herder.store.workflows.waits import decide


def start(
    store: Store,
    tenant_id: str,
    workflow_id: str,
    params: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    actor: str | None = None,
) -> tuple[WorkflowRun, bool]:
    """A new run of the workflow's current version, and whether it is new: a repeated
    idempotency key answers with the run it made. ``actor``: who starts it (its creator)."""
    with unit_of_work(store) as work:
        if idempotency_key is not None:
            lock_workflow(work.connection, tenant_id, workflow_id)
            existing = by_idempotency_key(work.connection, tenant_id, idempotency_key)
            if existing is not None:
                return _same_workflow(existing, workflow_id, idempotency_key), False
        run_id = start_in(
            work, tenant_id, workflow_id, params, idempotency_key=idempotency_key,
            created_by=actor,
        )  # fmt: skip
        if run_id is None:  # the same key, committed meanwhile
            raise Conflict(f"a run for Idempotency-Key {idempotency_key!r} was just made")
        follow_up(work)  # its first tasks start
        return read_workflow_run(work.connection, tenant_id, run_id), True


def cancel(
    store: Store, tenant_id: str, workflow_run_id: str, *, actor: str = "user"
) -> WorkflowRun:
    """Queued and pending tasks are cancelled at once, running ones stopped by their
    workers; the run ends ``cancelled`` when the last of them has ended."""
    with unit_of_work(store) as work:
        run = read_workflow_run(work.connection, tenant_id, workflow_run_id)
        if run.state.is_terminal:
            raise Conflict(
                f"workflow run {workflow_run_id} is already {run.state}; only active runs "
                "can be cancelled"
            )
        cancel_in(work, workflow_run_id, Cause(actor))
        follow_up(work)  # what the applies touched, before it is read back
        return read_workflow_run(work.connection, tenant_id, workflow_run_id)


def suspend(store: Store, tenant_id: str, workflow_run_id: str, *, actor: str) -> WorkflowRun:
    """Its active task runs are suspended (running ones stopped by their workers, with
    grace) and it starts no task until resumed; a suspended one is answered as it is."""
    with unit_of_work(store) as work:
        read_workflow_run(work.connection, tenant_id, workflow_run_id)
        suspend_in(work, workflow_run_id, actor)
        follow_up(work)  # what the applies touched, before it is read back
        return read_workflow_run(work.connection, tenant_id, workflow_run_id)


def resume(store: Store, tenant_id: str, workflow_run_id: str, *, actor: str) -> WorkflowRun:
    """Its suspended task runs are queued again and every task that became ready while
    it was suspended starts."""
    with unit_of_work(store) as work:
        read_workflow_run(work.connection, tenant_id, workflow_run_id)
        resume_in(work, workflow_run_id, actor)
        follow_up(work)  # what became ready starts, before it is read back
        return read_workflow_run(work.connection, tenant_id, workflow_run_id)


def repair_run(
    store: Store,
    tenant_id: str,
    workflow_run_id: str,
    *,
    token: int,
    tasks: Sequence[str] | None = None,
    dependents: bool = False,
) -> WorkflowRun:
    """Run tasks of an ended run again, in place: by default every task that did not
    succeed or skip; with ``dependents``, everything downstream of them too. ``token``
    is the run's ``repair`` as last read: two repairs from one reading cannot both
    apply (409). Earlier runs of the repaired tasks stay in history."""
    with unit_of_work(store) as work:
        read_workflow_run(work.connection, tenant_id, workflow_run_id)
        row = lock(work.connection, workflow_run_id)
        found = tallies_of(work.connection, workflow_run_id)
        facts = RepairFacts(
            workflow_run_id,
            WorkflowRunState(row.state),
            row.repair,
            spec_of(work.connection, row.workflow_id, row.version),
            tallied_board(current_runs(found, row.repair, row.repaired_tasks or ())),
        )
        work.apply(repair(facts, RepairRequest(token, tasks, dependents), work.now))
        work.follow(workflow_run=workflow_run_id)  # the repaired tasks start
        follow_up(work)
        return read_workflow_run(work.connection, tenant_id, workflow_run_id)


def decide_approval(
    store: Store,
    tenant_id: str,
    workflow_run_id: str,
    task: str,
    *,
    approved: bool,
    actor: str,
    comment: str | None,
) -> str:
    """Approve or reject a waiting approval task (``store.workflows.waits.decide``); its
    run's id. The workflow run moves on in the same transaction."""
    with unit_of_work(store) as work:
        run_id = decide(
            work, tenant_id, workflow_run_id, task, approved=approved, actor=actor,
            comment=comment,
        )  # fmt: skip
        follow_up(work)  # the decided task's dependents start
        return run_id


def decide_task(
    store: Store,
    caller: Principal,
    workflow_run_id: str,
    task: str,
    *,
    approved: bool,
    comment: str | None,
) -> WorkflowRunDetail:
    """An operator's decision (its actor the caller's key); the workflow run as it is
    after."""
    decide_approval(
        store, caller.tenant_id, workflow_run_id, task, approved=approved,
        actor=caller.actor, comment=comment,
    )  # fmt: skip
    return store.workflow_runs.get(caller.tenant_id, workflow_run_id)


def _same_workflow(existing: Any, workflow_id: str, key: str) -> WorkflowRun:
    if existing.workflow_id != workflow_id:
        raise Conflict(
            f"Idempotency-Key {key!r} was used for workflow run {existing.id} of workflow "
            f"{existing.workflow_id}",
            field="Idempotency-Key",
        )
    return workflow_run(existing)
