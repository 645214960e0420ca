"""What a workflow task's run is given: its job's spec with the task's overrides, the
workflow's parameters as environment, and its upstream tasks' outputs as inputs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from herder.domain.jobs import JobSpec, apply_overrides
from herder.domain.parameters import environment
from herder.domain.workflows.spec import TaskSpec

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
    spec = apply_overrides(job, overrides)
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
