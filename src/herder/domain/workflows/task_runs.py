"""What a workflow task's run is given: its job's spec with the task's overrides, the
workflow's parameters as environment, and its upstream tasks' outputs as inputs — and the
runs a decision's starts become (``build_task_runs``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from herder.domain.backfills import backfill_run_spec
from herder.domain.jobs import JobSpec, Runtime
from herder.domain.lifecycle.changes import Event, NewRun, TaskOf
from herder.domain.limits import fielded
from herder.domain.overrides import apply_overrides
from herder.domain.parameters import environment
from herder.domain.states import RunState
from herder.domain.workflows.spec import TaskSpec, WorkflowSpec
from herder.domain.workflows.waits import wake_at

if TYPE_CHECKING:
    from herder.domain.workflows.progress import Start

MAX_INPUTS_BYTES = 1024 * 1024  # all of a task's inputs, encoded as JSON
# What a wait's or an approval's run holds as its spec: it is never queued, so never run.
WAITING_SPEC = JobSpec(runtime=Runtime.SHELL, command="true")


def task_run_spec(job: JobSpec, task: TaskSpec, params: Mapping[str, Any]) -> JobSpec:
    """The job's spec; the workflow's parameters over its env — those the job declares as
    its own parameters checked as such — and the task's own env and parameters over those;
    the task's args, retry policy and timeout where it sets them. Validated whole, so what
    is stored is what a claim will accept (``ValidationError`` otherwise); ``Invalid`` for
    a variable no override may set (``apply_overrides``)."""
    declared = {parameter.name for parameter in job.parameters}
    own = {name: value for name, value in params.items() if name in declared}
    env = environment({name: value for name, value in params.items() if name not in declared})
    overrides = task.overrides.model_copy(
        update={
            "env": {**env, **(task.overrides.env or {})} or None,
            "params": {**own, **(task.overrides.params or {})} or None,
        }
    )
    spec = apply_overrides(job, overrides, limits=fielded(task.limits))
    if task.timeout_seconds is not None:
        spec = spec.model_copy(update={"timeout_seconds": task.timeout_seconds})
    return JobSpec.model_validate(spec.model_dump())


def gather_inputs(
    task: TaskSpec, outputs: Mapping[str, Sequence[tuple[int, Any]]]
) -> tuple[dict[str, Any], str | None]:
    """The task's inputs — each upstream task's output by name (a mapped one's as a list in
    map-index order) — or why they cannot be passed. ``outputs`` holds each upstream task's
    instances' ``(map_index, output)``."""
    inputs: dict[str, Any] = {}
    for parent in task.depends_on:
        instances = sorted(outputs.get(parent, ()), key=lambda pair: pair[0])
        mapped = any(index >= 0 for index, _ in instances)
        if mapped:
            inputs[parent] = [output for _, output in instances]
        elif instances:
            inputs[parent] = instances[0][1]
    size = len(json.dumps(inputs))
    if size > MAX_INPUTS_BYTES:
        return {}, (
            f"its upstream tasks' outputs are {size:,} bytes as JSON; a task is given at most "
            f"{MAX_INPUTS_BYTES:,} (1 MiB): pass references (paths, URLs) instead"
        )
    return inputs, None


@dataclass(frozen=True)
class PinnedRun:
    """A workflow run as its task runs are built from it: what it pinned when it started."""

    id: str
    tenant_id: str
    params: Mapping[str, Any]
    jobs: Mapping[str, Any]  # job name → {"id", "spec"} as pinned
    repair: int
    backfill_id: str | None = None
    created_by: str | None = None  # who started it: its task runs' creator too


def build_task_runs(
    workflow_run: PinnedRun,
    spec: WorkflowSpec,
    starts: Sequence[Start],
    now: datetime,
    new_run_id: Callable[[], str],
) -> list[NewRun]:
    """The runs of these decided tasks: a started task's instances queued (a mapped task's,
    one an item) with its start deadline, at ``low`` priority in a backfill; a task decided
    not to run, one run already ended saying why."""
    tasks = {task.name: task for task in spec.tasks}
    jobs: dict[str, JobSpec] = {}
    new_runs = []
    for start in starts:
        task = tasks[start.task]
        if task.job is None:
            new_runs.append(_waiting_run(workflow_run, task, start, now, new_run_id()))
            continue
        job = workflow_run.jobs[task.job]
        if task.job not in jobs:
            jobs[task.job] = JobSpec.model_validate(job["spec"])
        run_spec = task_run_spec(jobs[task.job], task, workflow_run.params)
        if workflow_run.backfill_id is not None:
            run_spec = backfill_run_spec(run_spec)
        queued = start.state is RunState.QUEUED
        items = start.items if queued and start.items is not None else None
        instances = [(-1, None)] if items is None else list(enumerate(items))
        deadline = task.overrides.start_deadline_seconds
        message = f"task {task.name} of workflow run {workflow_run.id}: {start.reason}"
        for map_index, item in instances:
            run_id = new_run_id()
            new_runs.append(
                NewRun(
                    id=run_id,
                    tenant_id=workflow_run.tenant_id,
                    job_id=job["id"],
                    job_name=task.job,
                    spec=run_spec,
                    state=start.state,
                    reason=None if queued else start.reason,
                    start_deadline=(
                        now + timedelta(seconds=deadline)
                        if deadline is not None and queued
                        else None
                    ),
                    event=Event(run_id, message, f"workflow:{workflow_run.id}", target=start.state),
                    created_by=workflow_run.created_by,
                    task=TaskOf(
                        workflow_run.id,
                        task.name,
                        workflow_run.repair,
                        map_index,
                        item,
                        start.inputs if queued else None,
                    ),
                )
            )
    return new_runs


def _waiting_run(
    workflow_run: PinnedRun, task: TaskSpec, start: Start, now: datetime, run_id: str
) -> NewRun:
    """A wait or approval task's one run: ``waiting`` until its ``run_at`` (its time or its
    timeout; none: only an event or a person ends it), or ended as decided. A wait until a
    parameter that holds no instant fails (the start checks it; a repair may not have)."""
    waiting = task.waiting
    assert waiting is not None  # a task that runs nothing waits for something
    state, reason, run_at = (
        start.state,
        None if start.state is RunState.QUEUED else start.reason,
        None,
    )
    if state is RunState.QUEUED:
        state = RunState.WAITING
        try:
            run_at = wake_at(waiting, dict(workflow_run.params), now)
        except ValueError as error:
            state, reason = RunState.FAILED, str(error)
    message = f"task {task.name} of workflow run {workflow_run.id}: {reason or start.reason}"
    return NewRun(
        id=run_id, tenant_id=workflow_run.tenant_id, job_id="", job_name=task.kind.job_name,
        spec=WAITING_SPEC, state=state, reason=reason, run_at=run_at,
        event=Event(run_id, message, f"workflow:{workflow_run.id}", target=state),
        task=TaskOf(workflow_run.id, task.name, workflow_run.repair),
        created_by=workflow_run.created_by,
    )  # fmt: skip
