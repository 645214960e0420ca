"""How a workflow run ended, in words: Airflow's leaf rule lets a run succeed with failed
tasks inside it (a failure handled downstream by an ``all_done`` clean-up or a ``one_failed``
notice), and a bare "succeeded" would hide them. The API's ``outcome`` field carries the
sentence, so the dashboard and the CLI say the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable

from herder.domain.states import RunState
from herder.domain.workflows.progress import failed_tasks
from herder.domain.workflows.states import WorkflowRunState


def outcome(state: WorkflowRunState, instances: Iterable[tuple[str, RunState]]) -> str:
    """The run's state, and for a run that succeeded with failed tasks how many there were:
    "succeeded, 2 tasks failed and were handled"."""
    handled = len(failed_tasks(instances)) if state is WorkflowRunState.SUCCEEDED else 0
    if handled == 1:
        return f"{state}, 1 task failed and was handled"
    if handled:
        return f"{state}, {handled} tasks failed and were handled"
    return str(state)
