"""How a workflow run moves on, decided whenever one of its task runs ends (and when it
starts): which pending tasks start, which are ``skipped`` or ``upstream_failed`` — and,
through those, their own dependants, in the same pass — and whether the run has ended.

A task instance that has no run yet is pending; nothing about it is stored, its waiting
reason is this decision's. A mapped task becomes one instance per item of its list when it
starts (a task mapped over an empty list is skipped, as in Airflow). The workflow run ends
when every task has ended: ``failed`` when a leaf task (one nothing depends on) failed or
was ``upstream_failed``, else ``succeeded`` — Airflow's rule, so a failure handled
downstream (an ``all_done`` clean-up, a ``one_failed`` notice) does not fail the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from herder.domain.states import RunState
from herder.domain.workflows.dag import Dag
from herder.domain.workflows.run_bound import past_bound
from herder.domain.workflows.spec import MapSource, TaskSpec, map_source
from herder.domain.workflows.states import WorkflowRunState
from herder.domain.workflows.task_runs import gather_inputs
from herder.domain.workflows.trigger_rules import (
    TriggerRule,
    Upstream,
    UpstreamEnd,
    Verdict,
    decide,
)

__all__ = [  # WorkflowRunState re-exported: its home is ``states``
    "MAX_MAP_ITEMS", "End", "Instance", "Progress", "Start", "WorkflowRunState", "advance",
    "failed_tasks", "map_items", "upstream_end", "upstream_of",
]  # fmt: skip

MAX_MAP_ITEMS = 1000


class Instance(NamedTuple):
    """A task instance's current run (of the latest repair that ran the task) — or, on a
    board the store counted (``walk.RunTally``), ``number`` of them in one state, the first
    of which (in map-index order) is ``map_index``."""

    map_index: int  # -1: the task is not mapped
    state: RunState
    number: int = 1  # how many


@dataclass(frozen=True)
class Start:
    """A pending task decided: its instances start (``QUEUED``) or it ends without running
    (``SKIPPED``, ``UPSTREAM_FAILED``, or ``FAILED`` when its list cannot be read)."""

    task: str
    state: RunState
    reason: str
    items: tuple[Any, ...] | None = None  # a mapped task's items, one instance each
    inputs: Mapping[str, Any] | None = None  # a started task's upstream outputs


@dataclass(frozen=True)
class End:
    state: WorkflowRunState
    reason: str


@dataclass(frozen=True)
class Progress:
    starts: list[Start] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # pending task → why
    end: End | None = None


_ENDS = {
    RunState.SUCCEEDED: UpstreamEnd.SUCCESS,
    RunState.SKIPPED: UpstreamEnd.SKIPPED,
    RunState.UPSTREAM_FAILED: UpstreamEnd.UPSTREAM_FAILED,
}


def upstream_end(state: RunState) -> UpstreamEnd | None:
    """How a task instance counts for its dependants' trigger rules: any other end — failed,
    timed out, lost, dead, cancelled, expired — is a failure; an active run has not ended."""
    if not state.is_terminal:
        return None
    return _ENDS.get(state, UpstreamEnd.FAILED)


def advance(
    dag: Dag,
    board: Mapping[str, Sequence[Instance]],
    params: Mapping[str, Any],
    map_sources: Mapping[str, Any],
    *,
    cancelling: bool = False,
    made: int = 0,
    outputs: Mapping[str, Sequence[tuple[int, Any]]] | None = None,
) -> Progress:
    """Decide every pending task, in dependency order, against ``board`` (each task's
    current instances; a task absent from it is pending). ``map_sources`` holds the output
    of each upstream task a pending mapped task reads its list from (a mapped upstream
    task: the list of its instances' outputs). A run being cancelled starts nothing. ``made``:
    the runs the workflow run has made so far, over every repair (``run_bound``). With
    ``outputs`` (each task's current instances' ``(map_index, output)``) a started task is
    given its inputs, or fails when they are too big — and its dependants are decided on
    that, in the same pass."""
    current = {name: list(instances) for name, instances in board.items()}
    progress = Progress()
    for name in dag.order:
        if name in current:
            continue
        if cancelling:
            progress.waiting[name] = "the workflow run is being cancelled"
            continue
        task = dag.tasks[name]
        if task.trigger_rule is not TriggerRule.ALWAYS and _none_started(task, current):
            progress.waiting[name] = _NOT_STARTED.format(len(task.depends_on), task.trigger_rule)
            continue
        decision = decide(task.trigger_rule, upstream_of(task, current))
        if decision.verdict is Verdict.WAIT:
            progress.waiting[name] = decision.reason
            continue
        start = _start(name, decision.verdict, decision.reason, map_source(task), params,
                       map_sources)  # fmt: skip
        if start.state is RunState.QUEUED:
            past = past_bound(made, len(start.items) if start.items is not None else 1)
            start = start if past is None else Start(name, RunState.FAILED, past)
        if start.state is RunState.QUEUED and outputs is not None:
            inputs, problem = gather_inputs(task, outputs)
            start = (
                Start(name, RunState.FAILED, problem)
                if problem is not None
                else replace(start, inputs=inputs)
            )
        progress.starts.append(start)
        current[name] = _instances(start)
        made += sum(instance.number for instance in current[name])
    return Progress(progress.starts, progress.waiting, _end(dag, current, cancelling))


_NOT_STARTED = "waiting on {0} of {0} upstream task(s) ({1})"


def upstream_of(task: TaskSpec, board: Mapping[str, Sequence[Instance]]) -> Upstream:
    """How the task's upstream instances on the board ended, counted (a task not on the
    board counts once, as not ended)."""
    ends: dict[UpstreamEnd | None, int] = {}
    for parent in task.depends_on:
        instances = board.get(parent)
        if instances is None:
            ends[None] = ends.get(None, 0) + 1
            continue
        for instance in instances:
            end = upstream_end(instance.state)
            ends[end] = ends.get(end, 0) + instance.number
    return Upstream.counted(ends)


def _none_started(task: TaskSpec, current: Mapping[str, Sequence[Instance]]) -> bool:
    """No upstream task has started yet: the task waits, whatever its rule (the shortcut
    that keeps a long chain's step from deciding every task below it)."""
    return bool(task.depends_on) and not any(parent in current for parent in task.depends_on)


_STARTED = {
    Verdict.RUN: RunState.QUEUED,
    Verdict.SKIPPED: RunState.SKIPPED,
    Verdict.UPSTREAM_FAILED: RunState.UPSTREAM_FAILED,
}


def _start(
    name: str,
    verdict: Verdict,
    reason: str,
    source: MapSource | None,
    params: Mapping[str, Any],
    map_sources: Mapping[str, Any],
) -> Start:
    state = _STARTED[verdict]
    if source is None or state is not RunState.QUEUED:
        return Start(name, state, reason)
    items, problem = map_items(source, params, map_sources)
    if problem is not None:
        return Start(name, RunState.FAILED, problem)
    if not items:
        return Start(name, RunState.SKIPPED, f"map_over {_describe(source)} is an empty list")
    return Start(name, state, reason, tuple(items))


def _instances(start: Start) -> list[Instance]:
    if start.items is None:
        return [Instance(-1, start.state)]
    return [Instance(0, start.state, len(start.items))]  # counted: all in one state


def map_items(
    source: MapSource, params: Mapping[str, Any], map_sources: Mapping[str, Any]
) -> tuple[list[Any], str | None]:
    """A mapped task's list, or why it has none."""
    value: Any = params if source.task is None else map_sources.get(source.task)
    if source.task is not None and value is None:
        return [], f"map_over {_describe(source)}: task {source.task!r} wrote no output"
    for key in source.path:
        if not isinstance(value, dict) or key not in value:
            return [], f"map_over {_describe(source)}: there is no key {key!r}"
        value = value[key]
    if not isinstance(value, list):
        return [], f"map_over {_describe(source)} is a {_json_type(value)}, not a list"
    if len(value) > MAX_MAP_ITEMS:
        return [], (
            f"map_over {_describe(source)} has {len(value):,} items; a task maps over at "
            f"most {MAX_MAP_ITEMS:,}"
        )
    return value, None


def _describe(source: MapSource) -> str:
    return ".".join(["params" if source.task is None else source.task, *source.path])


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "JSON object"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__


def _end(dag: Dag, current: Mapping[str, Sequence[Instance]], cancelling: bool) -> End | None:
    active = [
        name
        for name, instances in current.items()
        if any(not i.state.is_terminal for i in instances)
    ]
    if active:
        return None
    if cancelling:
        return End(WorkflowRunState.CANCELLED, "cancelled")
    if len(current) < len(dag.order):
        return None
    failed = failed_tasks(
        (task.name, instance.state)
        for task in dag.spec.tasks
        for instance in current.get(task.name, [])
    )
    if any(name in dag.leaves for name in failed):
        return End(WorkflowRunState.FAILED, "failed tasks: " + ", ".join(
            f"{name} ({state})" for name, state in failed.items()
        ))  # fmt: skip
    if failed:
        handled = ", ".join(failed)
        return End(WorkflowRunState.SUCCEEDED, f"every leaf task succeeded or was skipped "
                   f"(failures handled downstream: {handled})")  # fmt: skip
    return End(WorkflowRunState.SUCCEEDED, "every task succeeded or was skipped")


def failed_tasks(instances: Iterable[tuple[str, RunState]]) -> dict[str, RunState]:
    """Each task with an instance that failed or was ``upstream_failed`` (its first such
    state), in the order the instances come: the failures the leaf rule weighs."""
    failed: dict[str, RunState] = {}
    for task, state in instances:
        if task not in failed and upstream_end(state) in _FAILURES:
            failed[task] = state
    return failed


_FAILURES = (UpstreamEnd.FAILED, UpstreamEnd.UPSTREAM_FAILED)
