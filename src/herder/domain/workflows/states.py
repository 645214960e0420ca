"""The workflow-run state machine (docs/design.md §3): a run moves only along
``WORKFLOW_RUN_TRANSITIONS``; the store turns each move into one update guarded by the state
it expects, so a stale move changes nothing."""

from __future__ import annotations

from enum import StrEnum

from herder.domain.errors import Conflict


class WorkflowRunState(StrEnum):
    QUEUED = "queued"  # waiting for a slot under the workflow's max_active_runs
    RUNNING = "running"
    SUSPENDED = "suspended"  # starts no task until resumed; keeps its max_active_runs slot
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_WORKFLOW_RUN_STATES


TERMINAL_WORKFLOW_RUN_STATES = frozenset(
    {WorkflowRunState.SUCCEEDED, WorkflowRunState.FAILED, WorkflowRunState.CANCELLED}
)
ACTIVE_WORKFLOW_RUN_STATES = frozenset(
    state for state in WorkflowRunState if state not in TERMINAL_WORKFLOW_RUN_STATES
)

_REPAIRED = frozenset({WorkflowRunState.RUNNING})  # an ended run repaired in place runs again

WORKFLOW_RUN_TRANSITIONS: dict[WorkflowRunState, frozenset[WorkflowRunState]] = {
    WorkflowRunState.QUEUED: frozenset({WorkflowRunState.RUNNING, WorkflowRunState.CANCELLED}),
    WorkflowRunState.RUNNING: frozenset(
        {
            WorkflowRunState.RUNNING,  # its cancel asked: it runs until its tasks have ended
            WorkflowRunState.SUCCEEDED,
            WorkflowRunState.FAILED,
            WorkflowRunState.CANCELLED,
            WorkflowRunState.SUSPENDED,
        }
    ),
    # resumed; or cancelled: it runs again, asked to stop, until its tasks have ended
    WorkflowRunState.SUSPENDED: frozenset({WorkflowRunState.RUNNING}),
    **{state: _REPAIRED for state in TERMINAL_WORKFLOW_RUN_STATES},
}


def check_workflow_run_transition(source: WorkflowRunState, target: WorkflowRunState) -> None:
    """Raise ``Conflict`` naming both states when ``source → target`` is not a legal move."""
    if target not in WORKFLOW_RUN_TRANSITIONS[source]:
        raise Conflict(f"a {source} workflow run cannot become {target}")
