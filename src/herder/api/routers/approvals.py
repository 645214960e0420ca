"""/v1/workflow-runs/{id}/tasks/{task}/approve|reject: a person's decision on a workflow's
waiting ``approval`` task (docs/events.md#waiting-tasks), by an operator or above."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field

from herder.api.auth import Operator, StoreDep
from herder.api.openapi import problems
from herder.app import workflows
from herder.domain.workflows.models import WorkflowRunDetail

router = APIRouter(prefix="/v1/workflow-runs", tags=["workflows"])


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    comment: Annotated[str, Field(max_length=1000)] | None = Field(
        default=None, description="why: recorded with the approver, and in the task's output"
    )


@router.post("/{workflow_run_id}/tasks/{task}/approve", responses=problems(409))
def approve_task(
    workflow_run_id: str,
    task: str,
    caller: Operator,
    store: StoreDep,
    body: Annotated[Decision | None, Body()] = None,
) -> WorkflowRunDetail:
    """The task succeeds (its output: the decision, who made it, the comment) and the
    workflow run goes on. A task that is not waiting (decided, timed out, not reached) is a
    409; one that is not an approval a 422."""
    comment = body.comment if body else None
    return workflows.decide_task(
        store, caller, workflow_run_id, task, approved=True, comment=comment
    )


@router.post("/{workflow_run_id}/tasks/{task}/reject", responses=problems(409))
def reject_task(
    workflow_run_id: str,
    task: str,
    caller: Operator,
    store: StoreDep,
    body: Annotated[Decision | None, Body()] = None,
) -> WorkflowRunDetail:
    """The task fails with the decision as its output: its dependants decide by their
    trigger rules (``one_failed`` runs a clean-up, ``all_success`` is upstream_failed)."""
    comment = body.comment if body else None
    return workflows.decide_task(
        store, caller, workflow_run_id, task, approved=False, comment=comment
    )
