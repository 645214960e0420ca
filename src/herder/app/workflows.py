"""An operator's decision on a workflow run's waiting approval task."""

from __future__ import annotations

from herder.domain.actors import user_actor
from herder.domain.models import Principal
from herder.domain.workflows.models import WorkflowRunDetail
from herder.store.store import Store


def decide_task(
    store: Store,
    caller: Principal,
    workflow_run_id: str,
    task: str,
    *,
    approved: bool,
    comment: str | None,
) -> WorkflowRunDetail:
    """Record the decision (its actor the caller's key); the workflow run as it is after."""
    store.workflow_runs.decide(
        caller.tenant_id, workflow_run_id, task, approved=approved,
        actor=user_actor(caller.key_id), comment=comment,
    )  # fmt: skip
    return store.workflow_runs.get(caller.tenant_id, workflow_run_id)
