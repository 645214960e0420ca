"""Cancelling a workflow run: a queued one (waiting for a slot) ends ``cancelled`` at once;
a running one is asked to stop — its task runs are cancelled (``lifecycle.cancel``) and the
walk ends it ``cancelled`` once the last of them has ended. A suspended one likewise: it runs
again, asked to stop, so that the walk — which starts nothing for it — ends it. An ended one
is left as it is."""

from __future__ import annotations

from datetime import datetime
from typing import assert_never

from herder.domain.lifecycle.changes import Changes, workflow_run_transition
from herder.domain.workflows.states import WorkflowRunState


def cancel_workflow_run(workflow_run_id: str, state: WorkflowRunState, now: datetime) -> Changes:
    match state:
        case WorkflowRunState.QUEUED:
            move = workflow_run_transition(
                workflow_run_id, state, WorkflowRunState.CANCELLED, now,
                reason="cancelled before it started",
            )  # fmt: skip
        case WorkflowRunState.RUNNING | WorkflowRunState.SUSPENDED:
            move = workflow_run_transition(
                workflow_run_id, state, WorkflowRunState.RUNNING, now, cancel_requested=True
            )
        case WorkflowRunState.SUCCEEDED | WorkflowRunState.FAILED | WorkflowRunState.CANCELLED:
            return Changes()
        case _:
            assert_never(state)
    return Changes(workflow_run_moves=(move,))
