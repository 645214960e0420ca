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
from herder.domain.jobs import JobSpec, apply_overrides
from herder.domain.lifecycle.changes import Event, NewRun, TaskOf
from herder.domain.limits import fielded
from herder.domain.parameters import environment
from herder.domain.states import RunState
from herder.domain.workflows.spec import TaskSpec, WorkflowSpec

if TYPE_CHECKING:
    from herder.domain.workflows.progress import Start

MAX_INPUTS_BYTES = 1024 * 1024  # all of a task's inputs, encoded as JSON


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
