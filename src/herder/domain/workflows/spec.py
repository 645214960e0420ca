"""A workflow's definition: a DAG of tasks, each running a job (by name) with its own
overrides, upstream tasks, trigger rule and timeout. It is checked whole when it is created
or changed: a duplicate task name, an unknown upstream task or a cycle is refused with the
field and the names that make it so (``a → b → c → a``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, model_validator

from herder.domain.deadlines import Deadline
from herder.domain.errors import Invalid
from herder.domain.jobs import MAX_TIMEOUT_SECONDS, check_job_name
from herder.domain.limits import LimitReferences
from herder.domain.overrides import RunOverrides, StandingOverrides
from herder.domain.variables import variable_name_problem
from herder.domain.workflows.trigger_rules import TriggerRule
from herder.domain.workflows.waits import ApprovalSpec, WaitSpec, check_message

MAX_TASKS = 1000
MAX_PARAMS_BYTES = 64 * 1024  # a workflow's parameters, encoded as JSON
MAX_PARAM_NAME_CHARS = 128
_MAP_OVER = re.compile(r"^(params\.[A-Za-z_][A-Za-z0-9_]*|[A-Za-z0-9][A-Za-z0-9._-]*)$")


class Concurrency(StrEnum):
    """What a new run of a workflow does when ``max_active_runs`` are already active."""

    QUEUE = "queue"  # waits, and starts when an earlier run ends (oldest first)
    FORBID = "forbid"  # is refused (409)


def _check_params(params: dict[str, JsonValue]) -> dict[str, JsonValue]:
    for name in params:
        problem = variable_name_problem(name)
        if problem is not None or len(name) > MAX_PARAM_NAME_CHARS:
            raise ValueError(
                f"parameter {name[:MAX_PARAM_NAME_CHARS]!r}: a parameter reaches every task as "
                f"an environment variable of its name (at most {MAX_PARAM_NAME_CHARS} "
                f"characters): {problem or 'too long'}"
            )
    size = len(json.dumps(params))
    if size > MAX_PARAMS_BYTES:
        raise ValueError(f"parameters are {size:,} bytes as JSON; at most {MAX_PARAMS_BYTES:,}")
    return params


Params = Annotated[dict[str, JsonValue], AfterValidator(_check_params)]


def _check_map_over(source: str | None) -> str | None:
    if source is not None and not _MAP_OVER.match(source):
        raise ValueError(
            "map_over is 'params.NAME' (a list parameter) or 'TASK' / 'TASK.key.key' (a list "
            "in an upstream task's output)"
        )
    return source


TaskName = Annotated[str, AfterValidator(check_job_name)]  # the same alphabet as job names


class TaskKind(StrEnum):
    JOB = "job"  # runs its job on a worker
    WAIT = "wait"  # runs nothing: a duration, an instant or an event
    APPROVAL = "approval"  # runs nothing: an operator's decision

    @property
    def job_name(self) -> str:
        """What the run of a task that runs nothing names as its job: ``:wait``,
        ``:approval`` — no job's name starts with ``:``, so such a run is told apart."""
        return f":{self}"


NO_JOB_NAMES = frozenset(kind.job_name for kind in TaskKind if kind is not TaskKind.JOB)
"""The job names of runs that run nothing: not work, so not counted as runs that ended."""


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: TaskName
    job: Annotated[str, AfterValidator(check_job_name)] | None = Field(
        default=None, description="the job it runs, by name (or it is a wait or an approval)"
    )
    wait: WaitSpec | None = Field(
        default=None, description="run nothing: wait for a duration, an instant or an event"
    )
    approval: ApprovalSpec | None = Field(
        default=None, description="run nothing: wait for an operator to approve or reject"
    )
    depends_on: Annotated[list[TaskName], Field(max_length=MAX_TASKS)] = []
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS
    overrides: StandingOverrides = RunOverrides()  # args, env, retries: as a one-off run's
    timeout_seconds: Annotated[int, Field(ge=1, le=MAX_TIMEOUT_SECONDS)] | None = None
    map_over: Annotated[str | None, AfterValidator(_check_map_over)] = Field(
        default=None,
        description="run one instance per item of a list: 'params.NAME', or 'TASK' or "
        "'TASK.key' for a list in an upstream task's output (at most 1,000 items)",
    )
    limits: LimitReferences = []  # over the job's: a later reference to the same limit wins

    @model_validator(mode="after")
    def _one_kind(self) -> TaskSpec:
        kinds = [kind for kind in ("job", "wait", "approval") if getattr(self, kind) is not None]
        if len(kinds) != 1:
            raise ValueError("a task has exactly one of job, wait and approval")
        if self.job is None:
            running = {"overrides": self.overrides != RunOverrides(), "limits": bool(self.limits),
                       "timeout_seconds": self.timeout_seconds is not None,
                       "map_over": self.map_over is not None}  # fmt: skip
            given = [name for name, set_ in running.items() if set_]
            if given:
                raise ValueError(f"a {kinds[0]} task runs nothing: it takes no {given[0]}")
        return self

    @property
    def kind(self) -> TaskKind:
        if self.wait is not None:
            return TaskKind.WAIT
        return TaskKind.JOB if self.approval is None else TaskKind.APPROVAL

    @property
    def waiting(self) -> WaitSpec | ApprovalSpec | None:
        """What a task that runs nothing waits for."""
        return self.wait or self.approval


class WorkflowSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tasks: Annotated[list[TaskSpec], Field(min_length=1, max_length=MAX_TASKS)]
    params: Params = Field(default={}, description="parameters and their defaults")
    max_active_runs: Annotated[int, Field(ge=1, le=10_000)] | None = None
    concurrency: Concurrency = Concurrency.QUEUE
    deadline: Deadline | None = Field(
        default=None,
        description="the whole workflow run finished within this long of its start, or of "
        "its schedule's nominal fire time (docs/deadlines.md); its tasks' runs carry none",
    )

    def task(self, name: str) -> TaskSpec:
        return next(task for task in self.tasks if task.name == name)


def check_params(spec: WorkflowSpec, given: dict[str, Any]) -> dict[str, Any]:
    """A run's parameters: the defaults, with the given ones (only declared ones) over them."""
    for name in given:
        if name not in spec.params:
            declared = ", ".join(sorted(spec.params)) or "none"
            raise Invalid(
                f"{name!r} is not a parameter of this workflow (it declares: {declared})",
                field=f"params.{name}",
            )
    return {**spec.params, **given}


def check_messages(spec: WorkflowSpec) -> None:
    """``Invalid`` naming the first approval whose message names no declared parameter
    (``waits.check_message``): checked when a definition is written, not when it is read,
    so a version stored before still reads."""
    for position, task in enumerate(spec.tasks):
        if task.approval is not None:
            try:
                check_message(task.approval, spec.params)
            except ValueError as error:
                raise Invalid(
                    f"task {task.name!r}: {error}", field=f"tasks.{position}.approval.message"
                ) from None


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
        _check_mapping(spec, task, position)
    order: list[str] = []
    state: dict[str, str] = {}  # "visiting" on the current path, "done" once placed
    for task in spec.tasks:
        _visit(task.name, upstream, state, order, [], index)
    return order


@dataclass(frozen=True)
class MapSource:
    """Where a mapped task's list is: a parameter, or a path of keys into an upstream task's
    output (an empty path: the output itself)."""

    task: str | None  # None: the parameter ``path[0]``
    path: tuple[str, ...]


def map_source(task: TaskSpec) -> MapSource | None:
    """The source of a mapped task's list (task names may hold dots: the longest upstream
    task name that prefixes ``map_over`` is the task)."""
    if task.map_over is None:
        return None
    if task.map_over.startswith("params."):
        return MapSource(None, (task.map_over.removeprefix("params."),))
    for parent in sorted(task.depends_on, key=len, reverse=True):
        if task.map_over == parent or task.map_over.startswith(parent + "."):
            rest = task.map_over.removeprefix(parent).removeprefix(".")
            return MapSource(parent, tuple(rest.split(".")) if rest else ())
    raise Invalid(
        f"map_over reads an upstream task's output: {task.map_over!r} starts with none of "
        "depends_on",
        field="map_over",
    )


def _check_mapping(spec: WorkflowSpec, task: TaskSpec, position: int) -> None:
    field = f"tasks.{position}.map_over"
    try:
        source = map_source(task)
    except Invalid as error:
        raise Invalid(error.detail, field=field) from error
    if source is not None and source.task is None and source.path[0] not in spec.params:
        raise Invalid(
            f"map_over names parameter {source.path[0]!r}, which is not declared", field=field
        )


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
