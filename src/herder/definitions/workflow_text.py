"""One workflow written as YAML, as the dashboard's editor holds it: its text parsed and
checked as creating the workflow checks it, every problem at its line (a YAML syntax error
too), with the graph of what parsed drawn even when a check fails (a cycle: its tasks named);
and a stored workflow written back as such text, in ``export``'s form (only what differs from
the defaults), so one definition reads the same in a file and in the editor.

    text ──source.parse──► data ──_Body, TaskSpec each──► WorkflowSpec ──task_order,
      check_messages, check_run_bound──► Draft (problems, graph; the spec when all passed)

What only the store can say (the jobs, pools and limits it names exist; its name is free) is
``app/workflow_drafts.py``'s. Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, JsonValue, ValidationError

from herder.definitions.documents import WorkflowBody
from herder.definitions.export import document, to_yaml
from herder.definitions.plan import Existing
from herder.definitions.problems import Kind, Problem
from herder.definitions.source import DocumentPath, Source, parse
from herder.domain.errors import Invalid
from herder.domain.jobs import check_job_name
from herder.domain.workflows.models import Workflow
from herder.domain.workflows.run_bound import check_run_bound
from herder.domain.workflows.spec import (
    MAX_TASKS,
    TaskSpec,
    WorkflowSpec,
    check_messages,
    task_order,
)

MAX_TEXT_BYTES = 256 * 1024  # PyYAML reads ~120 KB a second on a small VM: ≤ ~2 s a check
MAX_PROBLEMS = 50  # a document of a thousand mistakes is told its first fifty
FILE = "workflow"  # the name problems carry inside this module (the answer gives lines only)
TaskKindName = Literal["job", "wait", "approval", ""]  # "": not yet exactly one of them
KINDS: tuple[TaskKindName, ...] = ("job", "wait", "approval")


class DraftProblem(BaseModel):
    line: int  # 1-based, in the text as sent
    path: str  # the field as the API's 422s name it, e.g. ``tasks.1.depends_on``; "" for all
    message: str


class GraphTask(BaseModel):
    name: str
    kind: TaskKindName
    job: str | None = None
    depends_on: list[str] = []
    line: int


class WorkflowGraph(BaseModel):
    """The tasks that parsed (up to ``MAX_TASKS``) and their edges, upstream task first; an
    edge to a task that is not there is no edge (it is a problem)."""

    tasks: list[GraphTask] = []
    edges: list[tuple[str, str]] = []
    cycle: list[str] = []  # the tasks a cycle passes (or that lie between two cycles)


class WorkflowCheck(BaseModel):
    """``POST /v1/workflows/check``'s answer: nothing is saved."""

    model_config = ConfigDict(frozen=True)

    valid: bool
    problems: list[DraftProblem]
    graph: WorkflowGraph
    workflow: dict[str, JsonValue] | None = None  # valid: the body POST or PUT takes


class _Body(WorkflowBody):
    name: Annotated[str, AfterValidator(check_job_name)]


@dataclass
class Draft:
    """What the text says so far: its problems, its graph, and once every pure check passed,
    its name and spec (for the store's checks) and where each of its paths is."""

    problems: list[DraftProblem] = field(default_factory=list)
    graph: WorkflowGraph = field(default_factory=WorkflowGraph)
    name: str | None = None
    spec: WorkflowSpec | None = None
    source: Source | None = None

    def add(self, path: DocumentPath, message: str) -> None:
        line = self.source.where(path).line if self.source is not None else 1
        self.problems.append(DraftProblem(line=line, path=field_of(path), message=message))

    def add_invalid(self, error: Invalid) -> None:
        """A domain refusal, at the line of the field it names."""
        self.add(path_of(error.field or ""), error.detail)


def field_of(path: DocumentPath) -> str:
    return ".".join(str(part) for part in path)


def path_of(field_name: str) -> DocumentPath:
    """``tasks.1.depends_on`` as ``("tasks", 1, "depends_on")``."""
    if not field_name:
        return ()
    return tuple(int(part) if part.isdigit() else part for part in field_name.split("."))


def check(text: str) -> Draft:
    """Every problem the text has as far as checks without the store reach (the first
    ``MAX_PROBLEMS``, by line); ``spec`` set only when none."""
    source = parse(text, FILE)
    if isinstance(source, Problem):
        line = source.where.line if source.where is not None else 1
        return Draft([DraftProblem(line=line, path="", message=source.message)])
    draft = Draft(source=source)
    _checked(source.data, draft)
    draft.problems.sort(key=lambda problem: problem.line)
    del draft.problems[MAX_PROBLEMS:]
    return draft


def _checked(data: Any, draft: Draft) -> None:
    if not isinstance(data, dict):
        draft.add((), "write one workflow: a mapping of name, tasks and its other fields")
        return
    assert draft.source is not None
    draft.graph = _graph(data, draft.source)
    if "workflows" in data and "tasks" not in data:
        draft.add(("workflows",), "write one workflow (name, tasks, …), not a file's list")
        return
    for path in _non_finite(data):
        draft.add(path, "a number must be finite: .inf and .nan have no JSON")
    if not draft.problems:
        _fields(data, draft)
    if not draft.problems:
        _structure(draft)


def _fields(data: dict[str, Any], draft: Draft) -> None:
    """Each field as the workflows API's model checks it, each task on its own (its
    problems told even when the workflow's own fields have some)."""
    body: _Body | None = None
    try:
        body = _Body.model_validate(data)
    except ValidationError as error:
        _refused(draft, (), error)
    tasks = data.get("tasks")
    if isinstance(tasks, list) and len(tasks) <= MAX_TASKS:
        for index, task in enumerate(tasks):
            if not isinstance(task, dict):
                continue  # the workflow's model said so
            try:
                TaskSpec.model_validate(task)
            except ValidationError as error:
                _refused(draft, ("tasks", index), error)
    if draft.problems or body is None:
        return
    try:
        draft.spec = WorkflowSpec.model_validate(
            {key: value for key, value in data.items() if key != "name"}
        )
    except ValidationError as error:  # each part passed alone: not expected, but said
        _refused(draft, (), error)
        return
    draft.name = body.name


def _refused(draft: Draft, path: DocumentPath, error: ValidationError) -> None:
    for item in error.errors(include_url=False):
        draft.add((*path, *item["loc"]), item["msg"].removeprefix("Value error, "))


def _structure(draft: Draft) -> None:
    """The checks over the whole DAG, as ``WorkflowRepository.create`` runs them, each
    problem found set aside so the next can be found (``_set_aside``)."""
    spec = draft.spec
    assert spec is not None
    tasks = list(spec.tasks)
    positions = list(range(len(tasks)))  # each kept task's place in the text
    for _ in range(MAX_PROBLEMS):
        trial = spec.model_copy(update={"tasks": tasks})
        try:
            task_order(trial)
            check_messages(trial)
            check_run_bound(trial, trial.params)
            break
        except Invalid as error:
            if not _set_aside(error, tasks, positions, draft):
                break
    if draft.problems:
        draft.spec = None


def _set_aside(error: Invalid, tasks: list[TaskSpec], positions: list[int], draft: Draft) -> bool:
    """``error`` told at its line, and the task it names changed so the checks can go on: a
    second task of a name dropped, an upstream task that is not there unnamed, a
    ``map_over`` cleared. False when they cannot (a cycle: the graph names its tasks)."""
    path = path_of(error.field or "")
    if len(path) < 3 or path[0] != "tasks" or not isinstance(path[1], int):
        draft.add_invalid(error)
        return False
    index = path[1]
    draft.add(("tasks", positions[index], *path[2:]), error.detail)
    task = tasks[index]
    names = {one.name for one in tasks}
    if path[2] == "name":
        del tasks[index], positions[index]
    elif path[2] == "depends_on" and not set(task.depends_on) <= names:
        known = [parent for parent in task.depends_on if parent in names]
        tasks[index] = task.model_copy(update={"depends_on": known})
    elif path[2] == "map_over":
        tasks[index] = task.model_copy(update={"map_over": None})
    else:  # a cycle, an approval's message
        return False
    return True


def _graph(data: dict[str, Any], source: Source) -> WorkflowGraph:
    """The tasks as written, whatever else is wrong with them, so the drawing follows the
    text as it is typed."""
    written = data.get("tasks")
    if not isinstance(written, list) or len(written) > MAX_TASKS:
        return WorkflowGraph()
    tasks = []
    for index, raw in enumerate(written):
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            continue
        upstream = raw.get("depends_on")
        kinds = [kind for kind in KINDS if raw.get(kind) is not None]
        job = raw.get("job")
        tasks.append(
            GraphTask(
                name=raw["name"],
                kind=kinds[0] if len(kinds) == 1 else "",
                job=job if isinstance(job, str) else None,
                depends_on=[
                    parent for parent in upstream if isinstance(parent, str)
                ] if isinstance(upstream, list) else [],
                line=source.where(("tasks", index)).line,
            )
        )  # fmt: skip
    names = {task.name for task in tasks}
    edges = list(
        dict.fromkeys(
            (parent, task.name) for task in tasks for parent in task.depends_on if parent in names
        )
    )
    return WorkflowGraph(tasks=tasks, edges=edges, cycle=_on_cycles(names, edges))


def _on_cycles(names: set[str], edges: list[tuple[str, str]]) -> list[str]:
    """The tasks left when those no cycle reaches (no upstream left) and those that reach
    none (no downstream left) are trimmed away, again and again: every task a cycle passes.
    Each trimmed task lowers its neighbours' counts once, so it is linear in the edges (the
    text's aliases can make 200,000 of them)."""
    upstream = dict.fromkeys(names, 0)
    downstream = dict.fromkeys(names, 0)
    parents: dict[str, list[str]] = {name: [] for name in names}
    children: dict[str, list[str]] = {name: [] for name in names}
    for parent, child in edges:
        if parent in upstream and child in upstream:
            upstream[child] += 1
            downstream[parent] += 1
            parents[child].append(parent)
            children[parent].append(child)
    left = set(names)
    trim = [name for name in names if upstream[name] == 0 or downstream[name] == 0]
    while trim:
        name = trim.pop()
        if name not in left:
            continue
        left.remove(name)
        for child in children[name]:
            upstream[child] -= 1
            if upstream[child] == 0 and child in left:
                trim.append(child)
        for parent in parents[name]:
            downstream[parent] -= 1
            if downstream[parent] == 0 and parent in left:
                trim.append(parent)
    return sorted(left)


def _non_finite(data: Any) -> list[DocumentPath]:
    """The paths of ``.inf`` and ``.nan`` values, which JSON cannot carry."""
    found: list[DocumentPath] = []
    stack: list[tuple[Any, DocumentPath]] = [(data, ())]
    while stack and len(found) < MAX_PROBLEMS:
        value, path = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            found.append(path)
        elif isinstance(value, dict):
            stack.extend((item, (*path, str(key))) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, (*path, index)) for index, item in enumerate(value))
    return found


def as_yaml(workflow: Workflow) -> str:
    """The workflow as the editor shows it: one definition, as ``herder export`` writes it."""
    fields = workflow.model_dump(mode="json", include=set(WorkflowSpec.model_fields))
    existing = Existing(Kind.WORKFLOW, workflow.name, workflow.id, fields)
    (item,) = document([existing], {Kind.WORKFLOW})[Kind.WORKFLOW.value]
    return to_yaml(item)
