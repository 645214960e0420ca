"""``herder workflow approve|reject``: an operator's decision on a workflow run's waiting
approval task (docs/events.md#waiting-tasks)."""

from __future__ import annotations

from typing import Annotated

import typer

from herder.cli.common import JsonFlag, client, out, print_json
from herder.cli.ids import WORKFLOW_RUN, full_id
from herder.cli.workflows import workflow_app

Comment = Annotated[
    str | None, typer.Option("--comment", "-m", help="why: recorded with your decision")
]


def _decide(run_id: str, task: str, *, approved: bool, comment: str | None, as_json: bool) -> None:
    with client() as herder:
        run_id = full_id(herder, WORKFLOW_RUN, run_id)
        run = herder.decide_workflow_task(run_id, task, approved=approved, comment=comment)
    if as_json:
        print_json(run)
        return
    verb = "approved" if approved else "rejected"
    waiting = [one.task for one in run.tasks if one.state == "waiting"]
    out.print(f"{verb} task {task} of workflow run {run.id}: the run is {run.state}")
    if waiting:
        out.print(f"still waiting: {', '.join(waiting)}")


@workflow_app.command("approve")
def workflow_approve(
    run_id: str, task: str, comment: Comment = None, as_json: JsonFlag = False
) -> None:
    """Approve a waiting approval task: it succeeds and the workflow run goes on."""
    _decide(run_id, task, approved=True, comment=comment, as_json=as_json)


@workflow_app.command("reject")
def workflow_reject(
    run_id: str, task: str, comment: Comment = None, as_json: JsonFlag = False
) -> None:
    """Reject a waiting approval task: it fails, and its dependants decide by their rules."""
    _decide(run_id, task, approved=False, comment=comment, as_json=as_json)
