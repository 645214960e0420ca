"""What a workflow task's run is given: its job's spec with the task's overrides, the
workflow's parameters as environment, and its upstream tasks' outputs as inputs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from herder.domain.jobs import JobSpec, apply_overrides
from herder.domain.workflows.spec import TaskSpec

MAX_INPUTS_BYTES = 1024 * 1024  # all of a task's inputs, encoded as JSON


def params_env(params: Mapping[str, Any]) -> dict[str, str]:
    """Each parameter as an environment variable of its name: a string as it is, any other
    value as JSON."""
    return {
        name: value if isinstance(value, str) else json.dumps(value)
        for name, value in params.items()
    }


def task_run_spec(job: JobSpec, task: TaskSpec, params: Mapping[str, Any]) -> JobSpec:
    """The job's spec; the parameters over its env, the task's own env over those; the
    task's args, retry policy and timeout where it sets them. Validated whole, so what is
    stored is what a claim will accept (``ValidationError`` otherwise)."""
    env = {**params_env(params), **(task.overrides.env or {})}
    spec = apply_overrides(job, task.overrides.model_copy(update={"env": env}))
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
