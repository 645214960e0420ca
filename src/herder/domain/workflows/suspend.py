"""Suspending a workflow run and resuming it (issue 24): while suspended it starts no task —
a task run that ends meanwhile is recorded, and what it would start waits — and its active
task runs are suspended with it (``lifecycle.suspend``: a running one stopped like a
preemption, with its grace). Resumed, it runs again: its suspended task runs are queued
again and the walk starts every task that became ready meanwhile, in the same unit of work.

A suspended run keeps its slot under ``max_active_runs`` (``admission.SLOT_HOLDING``), so a
resume never waits behind runs started while it was suspended. Only a running run is
suspended: a queued one has started nothing, and one being cancelled is ending. A second
suspend changes nothing; a resume of a run that is not suspended is refused, and so is one
while its task runs are still being stopped (a moment: their workers' grace).
"""

from __future__ import annotations

from datetime import datetime
from typing import assert_never

from herder.domain.errors import Conflict
from herder.domain.lifecycle.changes import Changes, workflow_run_transition
from herder.domain.workflows.states import WorkflowRunState


def suspend_workflow_run(
    workflow_run_id: str, state: WorkflowRunState, cancel_requested: bool, now: datetime
) -> Changes:
    """A running run becomes ``suspended``; a suspended one stays so (``Conflict`` for one
    queued, being cancelled, or ended)."""
    match state:
        case WorkflowRunState.RUNNING if cancel_requested:
            raise Conflict(
                f"workflow run {workflow_run_id} is being cancelled; it cannot be suspended"
            )
        case WorkflowRunState.RUNNING:
            move = workflow_run_transition(workflow_run_id, state, WorkflowRunState.SUSPENDED, now)
            return Changes(workflow_run_moves=(move,))
        case WorkflowRunState.SUSPENDED:
            return Changes()
        case WorkflowRunState.QUEUED:
            raise Conflict(
                f"workflow run {workflow_run_id} is queued for a slot under max_active_runs and "
                "has started nothing; cancel it instead"
            )
        case WorkflowRunState.SUCCEEDED | WorkflowRunState.FAILED | WorkflowRunState.CANCELLED:
            raise Conflict(
                f"workflow run {workflow_run_id} is already {state}; only running ones can be "
                "suspended"
            )
        case _:
            assert_never(state)


def resume_workflow_run(
    workflow_run_id: str, state: WorkflowRunState, stopping: int, now: datetime
) -> Changes:
    """A suspended run runs again (``Conflict`` for any other, and while ``stopping`` of its
    task runs are still being stopped by their workers: each would end suspended under a
    running workflow run, and nothing would resume it)."""
    if state is not WorkflowRunState.SUSPENDED:
        raise Conflict(
            f"workflow run {workflow_run_id} is {state}, not suspended; only a suspended one "
            "can be resumed"
        )
    if stopping:
        raise Conflict(
            f"{stopping} task run(s) of workflow run {workflow_run_id} are still being stopped "
            "by their workers; resume it once they are suspended"
        )
    move = workflow_run_transition(workflow_run_id, state, WorkflowRunState.RUNNING, now)
    return Changes(workflow_run_moves=(move,))
