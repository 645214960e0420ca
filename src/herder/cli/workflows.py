"""``herder workflow …``: define workflows (DAGs of jobs), run them, watch, cancel, suspend,
resume and repair their runs."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from herder.cli.answers import act_on, delete_named, listed, print_created, print_listing
from herder.cli.common import (
    JsonFlag,
    app,
    client,
    err,
    fail,
    json_pairs,
    new_idempotency_key,
    out,
    print_json,
    when,
)
from herder.cli.creators import CreatedByOption, creator_shown
from herder.cli.dag import definition_tasks, draw, run_tasks
from herder.cli.deadline_options import deadline_line, deadline_words
from herder.cli.ids import (
    WORKFLOW_RUN,
    QuietFlag,
    full_id,
    quiet_ids,
    short_ids,
    workflow_of,
)
from herder.cli.tones import state_style
from herder.cli.views import Field, Listing, record
from herder.client import HerderClient
from herder.definitions.problems import Problem
from herder.definitions.source import read
from herder.domain.states import RunState
from herder.domain.workflows.models import TaskRun, Workflow, WorkflowRun, WorkflowRunDetail
from herder.domain.workflows.spec import TaskKind
from herder.domain.workflows.states import WorkflowRunState

workflow_app = typer.Typer(
    help="Define workflows (DAGs of jobs), run them, watch, cancel, suspend, resume and repair "
    "their runs.",
    no_args_is_help=True,
)
app.add_typer(workflow_app, name="workflow")

POLL_SECONDS = 1.0  # how often --wait reads the run again
INTERRUPTED = 130  # the exit status of a wait stopped by Ctrl-C (128 + SIGINT), as a shell's
RUN_PREFIX = "wfrun_"  # a workflow run's id; anything else names a workflow

FileOption = Annotated[
    Path,
    typer.Option("--file", "-f", help="the API's body as YAML or JSON: name, tasks, params, …"),
]


def _read_body(path: Path) -> dict[str, Any]:
    """The workflow's body from a YAML (or JSON) file, read as ``herder apply`` reads its
    files: one document, aliases bounded, errors at their line."""
    source = read(path, str(path))
    if isinstance(source, Problem):
        raise fail(str(source))
    if not isinstance(source.data, dict):
        raise fail(f"{path} must hold a mapping (name, tasks, …)")
    return source.data


def _state(state: str) -> Text:
    return Text(state, style=state_style(state))


def _workflow_table(workflows: list[Workflow]) -> Listing:
    """Workflows; at 80 columns the last update gives way, and the parameters are cut."""
    shown = short_ids(workflow.id for workflow in workflows)
    table = Listing(
        "ID", "NAME", "VERSION", "TASKS", Field("PARAMS", free=True), Field("UPDATED", drop=1)
    )
    for workflow in workflows:
        table.add_row(
            shown[workflow.id], workflow.name, str(workflow.version), str(len(workflow.tasks)),
            ", ".join(sorted(workflow.params)) or "-", when(workflow.updated_at),
        )  # fmt: skip
    return table


def _runs_table(runs: list[WorkflowRun]) -> Listing:
    """Workflow runs; at 80 columns the finish, the repairs and the version give way, in
    that order."""
    shown = short_ids(run.id for run in runs)
    table = Listing(
        "ID", "WORKFLOW", Field("VERSION", drop=1), "STATE", Field("REPAIRS", drop=2), "CREATED",
        Field("FINISHED", drop=3),
    )  # fmt: skip
    for run in runs:
        table.add_row(
            shown[run.id], run.workflow_name, str(run.version), _state(run.state), str(run.repair),
            when(run.created_at), when(run.finished_at),
        )  # fmt: skip
    return table


def _run_view(run: WorkflowRunDetail) -> RenderableType:
    state = Text(run.outcome, style=state_style(run.state))
    if run.cancel_requested and not run.state.is_terminal:
        state.append(" (cancelling)")
    if run.state is WorkflowRunState.SUSPENDED:
        state.append(" (no task starts until resumed)")
    deadline = run.deadline_at and deadline_line(run.deadline_at, run.deadline_missed_at)
    lines: list[RenderableType] = [
        record(
            Text(run.id, style="bold"),
            [
                ("workflow", f"{run.workflow_name} v{run.version}"),
                ("state", state),
                ("reason", run.reason),
                ("params", json.dumps(run.params) if run.params else None),
                ("repairs", str(run.repair) if run.repair else None),
                ("deadline", deadline or None),
                ("created by", creator_shown(run)),
            ],
        ),
        draw(run_tasks(_short_run_ids(run.tasks))),
    ]
    if waiting := waiting_approvals(run):
        lines.append(Text("waiting for a decision:", style="bold"))
        lines += [Text(f"  {line}", overflow="fold") for one in waiting for line in _asks(run, one)]
    return Group(*lines)


def waiting_approvals(run: WorkflowRunDetail) -> list[TaskRun]:
    """The run's approval tasks waiting for a person's decision."""
    return [
        task
        for task in run.tasks
        if task.kind is TaskKind.APPROVAL and task.state is RunState.WAITING
    ]


def _asks(run: WorkflowRunDetail, task: TaskRun) -> list[str]:
    """A waiting approval in words: its task and message, then the commands that decide it,
    with the run's whole id to copy."""
    decide = f"herder workflow {{}} {run.id} {task.task} -m 'why'"
    return [
        f"{task.task}: {task.message or '(no message)'}",
        f"  {decide.format('approve')}",
        f"  {decide.format('reject')}",
    ]


def _short_run_ids(tasks: list[TaskRun]) -> list[TaskRun]:
    """The task instances with their runs' ids as their shortest unique starts, as ``herder
    run show`` takes them back."""
    shown = short_ids(task.run_id for task in tasks if task.run_id)
    return [task.model_copy(update={"run_id": shown.get(task.run_id or "")}) for task in tasks]


def _definition_view(workflow: Workflow) -> RenderableType:
    most = workflow.max_active_runs
    deadline = None if workflow.deadline is None else deadline_words(workflow.deadline)
    head = record(
        Text(workflow.id, style="bold"),
        [
            ("workflow", f"{workflow.name} v{workflow.version}"),
            ("tasks", str(len(workflow.tasks))),
            ("params", json.dumps(workflow.params) if workflow.params else None),
            ("max_active_runs", None if most is None else f"{most} ({workflow.concurrency})"),
            ("deadline", deadline),
            ("created by", creator_shown(workflow)),
        ],
    )
    return Group(head, draw(definition_tasks(workflow)))


def _follow(herder: HerderClient, run_id: str, *, live: bool) -> WorkflowRunDetail:
    """Read the run until it ends, redrawing it if ``live``, and saying on stderr when an
    approval starts waiting (a script waits too). The live view is cleared at the end (a
    long DAG is cropped to the terminal while live) for the caller to print the last
    reading whole. Ctrl-C stops the waiting, not the run: its id is printed to go on with."""
    run = herder.get_workflow_run(run_id)
    view = Live(_run_view(run), console=out, auto_refresh=False, transient=True)
    told: set[tuple[str, int]] = set()
    try:
        with view if live else nullcontext():
            while True:
                for task in waiting_approvals(run):
                    if (task.task, task.map_index) not in told:
                        told.add((task.task, task.map_index))
                        err.print("waiting for a decision on " + "\n  ".join(_asks(run, task)),
                                  highlight=False)  # fmt: skip
                if run.state.is_terminal:
                    return run
                time.sleep(POLL_SECONDS)
                run = herder.get_workflow_run(run_id)
                if live:
                    view.update(_run_view(run), refresh=True)
    except KeyboardInterrupt:
        err.print(
            f"stopped waiting; workflow run {run_id} goes on: 'herder workflow show {run_id}'",
            highlight=False,
        )
        raise typer.Exit(INTERRUPTED) from None


@workflow_app.command("create")
def workflow_create(file: FileOption, as_json: JsonFlag = False, quiet: QuietFlag = False) -> None:
    """Create a workflow from a YAML or JSON file.

    The whole DAG is checked: cycles, unknown tasks and jobs are refused with the field named.
    """
    body = _read_body(file)
    with client() as herder:
        workflow = herder.create_workflow(body)
    print_created(workflow, "workflow", as_json=as_json, quiet=quiet, more=", version 1")


@workflow_app.command("update")
def workflow_update(
    workflow: str,
    file: FileOption,
    if_version: Annotated[
        int | None, typer.Option(help="replace it only if it is still at this version")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Replace a workflow (by name or id) with a new version from a YAML or JSON file.

    Runs already started keep the version they began with.
    """
    body = _read_body(file)
    with client() as herder:
        found = workflow_of(herder, workflow)
        updated = herder.update_workflow(
            found.id, {"name": found.name, **body}, if_version=if_version
        )
    if as_json:
        print_json(updated)
    else:
        out.print(f"updated workflow [bold]{updated.name}[/] to version {updated.version}")


@workflow_app.command("list")
def workflow_list(
    name: Annotated[str | None, typer.Option()] = None,
    created_by: CreatedByOption = None,
    limit: int = 100,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """List workflows."""
    page = listed(HerderClient.list_workflows, name=name, created_by=created_by, limit=limit)
    print_listing(page, _workflow_table, as_json=as_json, quiet=quiet)


@workflow_app.command("show")
def workflow_show(
    target: Annotated[str, typer.Argument(help="a workflow run id (wfrun_…), or a workflow")],
    as_json: JsonFlag = False,
) -> None:
    """Draw a workflow run's DAG, or a workflow's definition.

    Each task of a run shows its state, why it waits or was not run, and its run id (for
    'herder run logs'); each approval waiting for a decision, its message and the commands
    that decide it.
    """
    with client() as herder:
        shown: WorkflowRunDetail | Workflow = (
            herder.get_workflow_run(full_id(herder, WORKFLOW_RUN, target))
            if target.startswith(RUN_PREFIX)
            else workflow_of(herder, target)
        )
    if as_json:
        print_json(shown)
    elif isinstance(shown, WorkflowRunDetail):
        out.print(_run_view(shown))
    else:
        out.print(_definition_view(shown))


@workflow_app.command("delete")
def workflow_delete(workflow: str) -> None:
    """Delete a workflow (by name or id)."""
    delete_named(workflow_of, HerderClient.delete_workflow, workflow, "workflow")


@workflow_app.command("run")
def workflow_run(
    workflow: str,
    param: Annotated[
        list[str], typer.Option(help="KEY=VALUE, the value as JSON if it is JSON; repeatable")
    ] = [],  # noqa: B006
    idempotency_key: Annotated[
        str | None, typer.Option(help="same key, same run (default: a new key)")
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            help="follow the run to its end (exit 1 unless it succeeded); say when an approval "
            "waits; Ctrl-C stops the waiting, not the run"
        ),
    ] = False,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Start a run of a workflow (by name or id) at its current version."""
    params = json_pairs(param, "--param")
    with client() as herder:
        run: WorkflowRun = herder.start_workflow(
            workflow_of(herder, workflow).id,
            params,
            idempotency_key=idempotency_key or new_idempotency_key(),
        )
        if wait:
            run = _follow(herder, run.id, live=not (as_json or quiet))
    if as_json:
        print_json(run)
    elif quiet:
        quiet_ids([run.id])
    elif isinstance(run, WorkflowRunDetail):
        out.print(_run_view(run))
    else:
        out.print(f"started workflow run [bold]{run.id}[/] of {run.workflow_name} ({run.state})")
    if wait and run.state is not WorkflowRunState.SUCCEEDED:
        raise typer.Exit(1)


@workflow_app.command("runs")
def workflow_runs(
    workflow: Annotated[str | None, typer.Argument(help="a workflow (default: all)")] = None,
    state: Annotated[str | None, typer.Option(help=", ".join(WorkflowRunState))] = None,
    limit: int = 50,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """List workflow runs, newest first."""
    with client() as herder:
        workflow_id = workflow_of(herder, workflow).id if workflow else None
        page = herder.list_workflow_runs(workflow_id=workflow_id, state=state, limit=limit)
    print_listing(page, _runs_table, as_json=as_json, quiet=quiet)


def _is_now(run: WorkflowRun) -> str:
    return f"workflow run {run.id} is {run.state}"


def _stopping(run: WorkflowRun) -> str:
    return f"{_is_now(run)}: its running tasks are being stopped"


def _cancelling(run: WorkflowRun) -> str:
    if run.state.is_terminal:
        return _is_now(run)
    return f"cancelling workflow run {run.id}: its running tasks are being stopped"


@workflow_app.command("cancel")
def workflow_cancel(run_id: str, as_json: JsonFlag = False) -> None:
    """Cancel a workflow run.

    Pending and queued tasks are cancelled at once, running ones when their workers have
    stopped them.
    """
    act_on(WORKFLOW_RUN, run_id, HerderClient.cancel_workflow_run, _cancelling, as_json=as_json)


@workflow_app.command("suspend")
def workflow_suspend(run_id: str, as_json: JsonFlag = False) -> None:
    """Suspend a workflow run: no task starts until it is resumed.

    Its queued tasks are held and its running ones stopped by their workers, with the job's
    grace to save a checkpoint. It keeps its max_active_runs slot.
    """
    act_on(WORKFLOW_RUN, run_id, HerderClient.suspend_workflow_run, _stopping, as_json=as_json)


@workflow_app.command("resume")
def workflow_resume(run_id: str, as_json: JsonFlag = False) -> None:
    """Resume a suspended workflow run.

    Its suspended tasks are queued again and every task that became ready meanwhile starts.
    """
    act_on(WORKFLOW_RUN, run_id, HerderClient.resume_workflow_run, _is_now, as_json=as_json)


@workflow_app.command("repair")
def workflow_repair(
    run_id: str,
    task: Annotated[
        list[str],
        typer.Option(help="a task to run again, repeatable (default: each that did not succeed)"),
    ] = [],  # noqa: B006
    dependents: Annotated[
        bool, typer.Option("--dependents", help="run everything downstream of them again too")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Run tasks of an ended workflow run again, in place.

    Their earlier runs are kept. Refused if someone repaired it since it was read.
    """
    with client() as herder:
        run_id = full_id(herder, WORKFLOW_RUN, run_id)
        token = herder.get_workflow_run(run_id).repair
        run = herder.repair_workflow_run(
            run_id, repair=token, tasks=task or None, dependents=dependents
        )
    if as_json:
        print_json(run)
    else:
        out.print(f"repairing workflow run {run.id} (repair {run.repair}): {run.state}")
