"""A workflow's definition: a DAG of tasks, each running a job (by name) with its own
overrides, upstream tasks, trigger rule and timeout. It is checked whole when it is created
or changed: a duplicate task name, an unknown upstream task or a cycle is refused with the
field and the names that make it so (``a → b → c → a``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from herder.domain.errors import Invalid
from herder.domain.jobs import MAX_TIMEOUT_SECONDS, RunOverrides, check_job_name
from herder.domain.workflows.trigger_rules import TriggerRule

MAX_TASKS = 1000

TaskName = Annotated[str, AfterValidator(check_job_name)]  # the same alphabet as job names


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: TaskName
    job: Annotated[str, AfterValidator(check_job_name)]  # the job it runs, by name
    depends_on: Annotated[list[TaskName], Field(max_length=MAX_TASKS)] = []
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS
    overrides: RunOverrides = RunOverrides()  # args, env, retries: as a one-off run's
    timeout_seconds: Annotated[int, Field(ge=1, le=MAX_TIMEOUT_SECONDS)] | None = None


class WorkflowSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tasks: Annotated[list[TaskSpec], Field(min_length=1, max_length=MAX_TASKS)]


def task_order(spec: WorkflowSpec) -> list[str]:
    """The tasks in an order where each comes after its upstream tasks (the order given,
    where it allows), or ``Invalid`` naming the first problem found."""
    index = _unique_names(spec)
    upstream: dict[str, list[str]] = {}
    for position, task in enumerate(spec.tasks):
        for parent in task.depends_on:
            if parent not in index:
                raise Invalid(
                    f"task {task.name!r} depends on {parent!r}, which is not a task of this "
                    "workflow",
                    field=f"tasks.{position}.depends_on",
                )
        upstream[task.name] = list(dict.fromkeys(task.depends_on))
    order: list[str] = []
    state: dict[str, str] = {}  # "visiting" on the current path, "done" once placed
    for task in spec.tasks:
        _visit(task.name, upstream, state, order, [], index)
    return order


def _unique_names(spec: WorkflowSpec) -> dict[str, int]:
    index: dict[str, int] = {}
    for position, task in enumerate(spec.tasks):
        if task.name in index:
            raise Invalid(
                f"two tasks are named {task.name!r} (tasks {index[task.name]} and {position}); "
                "task names are unique within a workflow",
                field=f"tasks.{position}.name",
            )
        index[task.name] = position
    return index


def _visit(
    name: str,
    upstream: dict[str, list[str]],
    state: dict[str, str],
    order: list[str],
    path: list[str],
    index: dict[str, int],
) -> None:
    """Depth first along ``depends_on``, iteratively: a thousand tasks in a chain must not
    exhaust Python's recursion limit. ``path`` is the chain of tasks being visited."""
    if state.get(name) == "done":
        return
    stack = [(name, iter(upstream[name]))]
    state[name] = "visiting"
    path.append(name)
    while stack:
        current, parents = stack[-1]
        parent = next(parents, None)
        if parent is None:
            stack.pop()
            path.pop()
            state[current] = "done"
            order.append(current)
        elif state.get(parent) == "visiting":
            cycle = [*path[path.index(parent) :], parent]
            raise Invalid(
                "the tasks' dependencies make a cycle: " + " → ".join(reversed(cycle)),
                field=f"tasks.{index[current]}.depends_on",  # the link that closes it
            )
        elif state.get(parent) != "done":
            state[parent] = "visiting"
            path.append(parent)
            stack.append((parent, iter(upstream[parent])))
