"""How many runs one workflow run may make: its tasks' instances over every repair. Without a
bound a workflow of 1,000 tasks each mapped over 1,000 items makes a million runs from one
request. A start that can be seen to pass it is refused (422 naming ``params``); a fan-out
that would pass it when its list is read fails its task, saying why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from herder.domain.errors import Invalid
from herder.domain.workflows.spec import WorkflowSpec, map_source

MAX_RUNS_PER_WORKFLOW_RUN = 10_000


def runs_at_start(spec: WorkflowSpec, params: Mapping[str, Any]) -> int:
    """The fewest runs a run with these parameters makes: one a task, or one an item of a
    list a task maps over from the parameters (an empty or unreadable list still makes one
    run, that records why the task did not run)."""
    total = 0
    for task in spec.tasks:
        source = map_source(task)
        items = params.get(source.path[0]) if source is not None and source.task is None else None
        total += max(len(items), 1) if isinstance(items, list) else 1
    return total


def check_run_bound(spec: WorkflowSpec, params: Mapping[str, Any]) -> None:
    count = runs_at_start(spec, params)
    if count > MAX_RUNS_PER_WORKFLOW_RUN:
        raise Invalid(
            f"this run would make {count:,} runs (its tasks and the lists they map over); a "
            f"workflow run makes at most {MAX_RUNS_PER_WORKFLOW_RUN:,}",
            field="params",
        )


def past_bound(made: int, instances: int) -> str | None:
    """Why a task's ``instances`` cannot start after ``made`` runs, or None if they can."""
    if made + instances <= MAX_RUNS_PER_WORKFLOW_RUN:
        return None
    return (
        f"its {instances:,} instance(s) would take the workflow run past "
        f"{MAX_RUNS_PER_WORKFLOW_RUN:,} runs (it has made {made:,}); a workflow run makes at "
        f"most {MAX_RUNS_PER_WORKFLOW_RUN:,}"
    )
