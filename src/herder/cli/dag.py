"""A workflow drawn in the terminal: its tasks in layers by their longest path from a root
task, each with its upstream tasks named, its state and why — plain lines rather than drawn
edges, so a thousand tasks stay readable at 80 columns.

``draw`` is pure: tasks in, a Rich renderable out. ``run_tasks`` and ``definition_tasks``
turn the API's answers into its input.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from herder.cli.tones import state_style
from herder.domain.state_tones import RUN_STATES_WORST_FIRST
from herder.domain.states import FAILED_RUN_STATES, RunState
from herder.domain.workflows.models import TaskRun, Workflow

UPSTREAM_SHOWN = 5  # upstream names shown before "+N more": a fan-in stays one line
MAPPED_INSTANCES_SHOWN = 3  # a mapped task's failed instances listed with their run ids

# The order a mapped task's instance counts are listed in: most telling first — succeeded,
# then the other ended states and then the active ones, each worst first.
STATE_ORDER = (
    RunState.SUCCEEDED,
    *(s for s in RUN_STATES_WORST_FIRST if s.is_terminal and s is not RunState.SUCCEEDED),
    *(s for s in RUN_STATES_WORST_FIRST if s.is_active),
)


@dataclass(frozen=True)
class Instance:
    """One instance of a task in a run."""

    state: str
    reason: str | None = None
    run_id: str | None = None
    map_index: int = -1  # -1: the task is not mapped


@dataclass(frozen=True)
class DagTask:
    """A task to draw: of a run when it has instances, of a definition otherwise (then
    ``note`` says what it runs)."""

    name: str
    depends_on: tuple[str, ...] = ()
    instances: tuple[Instance, ...] = ()
    note: str = ""

    @property
    def mapped(self) -> bool:
        return any(instance.map_index >= 0 for instance in self.instances)


def layers(tasks: Sequence[DagTask]) -> list[list[DagTask]]:
    """The tasks by their longest path from a root (a task with no upstream task), each
    layer in the order given. Linear in tasks and edges (Kahn's order). Upstream names that
    are not tasks are ignored; tasks on a cycle, which the API refuses, go last."""
    by_name = {task.name: task for task in tasks}
    parents = {task.name: {p for p in task.depends_on if p in by_name} for task in tasks}
    children: dict[str, list[str]] = {name: [] for name in by_name}
    for name, ups in parents.items():
        for parent in ups:
            children[parent].append(name)
    unmet = {name: len(ups) for name, ups in parents.items()}
    depth = dict.fromkeys(by_name, 0)
    ready = deque(name for name, count in unmet.items() if count == 0)
    while ready:
        name = ready.popleft()
        for child in children[name]:
            depth[child] = max(depth[child], depth[name] + 1)
            unmet[child] -= 1
            if unmet[child] == 0:
                ready.append(child)
    deepest = max((depth[name] for name, count in unmet.items() if count == 0), default=-1)
    for name, count in unmet.items():
        if count:
            depth[name] = deepest + 1
    grouped: list[list[DagTask]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for task in tasks:
        if by_name[task.name] is task:
            grouped[depth[task.name]].append(task)
    return grouped


def draw(tasks: Sequence[DagTask]) -> RenderableType:
    """Each layer under a heading, each task on a line of its own (wrapped, never cut, in
    a narrow terminal): ``├─ evaluate ← train  upstream_failed: … run_…``."""
    parts: list[RenderableType] = []
    for number, layer in enumerate(layers(tasks), start=1):
        parts.append(Text(f"layer {number}", style="bold"))
        grid = Table.grid(padding=(0, 1, 0, 0))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for position, task in enumerate(layer):
            last = position == len(layer) - 1
            grid.add_row("└─" if last else "├─", _line(task))
            for extra in _mapped_instances(task):
                grid.add_row("" if last else "│", extra)
        parts.append(grid)
    return Group(*parts)


def _line(task: DagTask) -> Text:
    line = Text()
    line.append(task.name, style="bold")
    if task.mapped:
        line.append(f" ×{len(task.instances)}")  # noqa: RUF001
    if task.depends_on:
        line.append(" ← " + _names(task.depends_on), style="dim")
    if not task.instances:
        if task.note:
            line.append(f"  {task.note}", style="dim")
        return line
    line.append("  ")
    if task.mapped:
        counts = Counter(instance.state for instance in task.instances)
        _append_counts(line, counts)
        return line
    instance = task.instances[0]  # an unmapped task has one current instance
    line.append(instance.state, style=state_style(instance.state))
    if instance.reason and instance.state != RunState.SUCCEEDED:
        line.append(f": {instance.reason}")
    if instance.run_id:
        line.append(f"  {instance.run_id}", style="dim")
    return line


def _mapped_instances(task: DagTask) -> list[Text]:
    """A mapped task's failed instances, a few, with the runs whose logs tell why."""
    if not task.mapped:
        return []
    failed = [i for i in task.instances if i.state in FAILED_RUN_STATES]
    shown = []
    for instance in failed[:MAPPED_INSTANCES_SHOWN]:
        text = Text(f"   [{instance.map_index}] ")
        text.append(instance.state, style=state_style(instance.state))
        if instance.reason:
            text.append(f": {instance.reason}")
        if instance.run_id:
            text.append(f"  {instance.run_id}", style="dim")
        shown.append(text)
    if len(failed) > MAPPED_INSTANCES_SHOWN:
        shown.append(Text(f"   … {len(failed) - MAPPED_INSTANCES_SHOWN:,} more failed"))
    return shown


def _append_counts(line: Text, counts: Counter[str]) -> None:
    ordered = [s for s in STATE_ORDER if s in counts] + sorted(set(counts) - set(STATE_ORDER))
    for position, state in enumerate(ordered):
        if position:
            line.append(", ")
        line.append(f"{counts[state]:,} {state}", style=state_style(state))


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:UPSTREAM_SHOWN])
    hidden = len(names) - UPSTREAM_SHOWN
    return f"{shown} +{hidden:,} more" if hidden > 0 else shown


def run_tasks(task_runs: Iterable[TaskRun]) -> list[DagTask]:
    """A workflow run's task instances (as the API lists them) grouped by task, in order."""
    grouped: dict[str, list[TaskRun]] = {}
    for task_run in task_runs:
        grouped.setdefault(task_run.task, []).append(task_run)
    return [
        DagTask(
            name=name,
            depends_on=tuple(runs[0].depends_on),
            instances=tuple(
                Instance(str(run.state), run.reason, run.run_id, run.map_index) for run in runs
            ),
        )
        for name, runs in grouped.items()
    ]


def definition_tasks(workflow: Workflow) -> list[DagTask]:
    """A workflow's tasks as defined: each with its job, and its trigger rule and list
    when they are not the plain case."""
    drawn = []
    for task in workflow.tasks:
        note = [f"job {task.job}" if task.job is not None else str(task.kind)]
        if task.trigger_rule != "all_success":
            note.append(str(task.trigger_rule))
        if task.map_over:
            note.append(f"map_over {task.map_over}")
        drawn.append(DagTask(task.name, tuple(task.depends_on), note=" · ".join(note)))
    return drawn
