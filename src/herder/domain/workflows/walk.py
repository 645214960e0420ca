"""The walk from a task run's end to its successors' start, decided once: over the facts
the store read in one go — the workflow run, its version's DAG, every run it has made
counted by task, repair and state (``RunTally``: a fan-out's thousand instances are a few
counts, not a thousand rows read at each of their ends), the runs whose outputs a start
may pass on (``outputs_wanted``), the tenant's room under ``max_queued`` — which tasks
start (with their inputs), which end without running, the runs they become, and whether
the workflow run has ended.

"The current repair" is here, once: each task's runs of the latest repair that ran it; a
task the latest repair runs again has none until it starts again (it is pending).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar

from herder.domain.lifecycle.changes import (
    DUE,
    WORK,
    Changes,
    NewRun,
    workflow_run_transition,
)
from herder.domain.queue_room import QueueRoom, hold
from herder.domain.states import RunState
from herder.domain.workflows.dag import Dag
from herder.domain.workflows.progress import Instance, advance, upstream_of
from herder.domain.workflows.spec import WorkflowSpec, map_source
from herder.domain.workflows.states import WorkflowRunState
from herder.domain.workflows.task_runs import PinnedRun, build_task_runs
from herder.domain.workflows.trigger_rules import Verdict, decide


class TaskInstance(Protocol):
    """A run of a task instance, as far as choosing the current repair needs (a row read
    for the API's view, or a ``TaskRunFact``)."""

    @property
    def task_name(self) -> str: ...
    @property
    def map_index(self) -> int: ...
    @property
    def repair(self) -> int: ...
    @property
    def state(self) -> str: ...


Found = TypeVar("Found", bound=TaskInstance)
RUN_STATES = {str(state): state for state in RunState}  # faster than ``RunState(value)``


class TaskRunFact(NamedTuple):  # a tuple: a fan-out's join reads a thousand
    task_name: str
    map_index: int  # -1: the task is not mapped
    repair: int
    state: RunState
    output: Any = None


class RunTally(NamedTuple):
    """A task's runs of one repair in one state, counted (the store's ``GROUP BY``)."""

    task_name: str
    map_index: int  # the lowest map index among them (-1: the task is not mapped)
    repair: int
    state: RunState
    number: int  # how many


def tally(found: Iterable[TaskRunFact]) -> list[RunTally]:
    """The runs counted by task, repair and state, as the store reads them."""
    counted: dict[tuple[str, int, RunState], tuple[int, int]] = {}
    for run in found:
        key = (run.task_name, run.repair, run.state)
        first, count = counted.get(key, (run.map_index, 0))
        counted[key] = (min(first, run.map_index), count + 1)
    return [
        RunTally(task, first, repair, state, count)
        for (task, repair, state), (first, count) in counted.items()
    ]


@dataclass(frozen=True)
class WalkFacts:
    workflow_run: PinnedRun
    state: WorkflowRunState
    repaired_tasks: frozenset[str]
    cancel_requested: bool
    dag: Dag
    # The runs read whole, over every repair: every run it has made where ``tallies`` is
    # None, else at least those of the tasks whose outputs a start may pass on.
    task_runs: Sequence[TaskRunFact]
    room: QueueRoom  # the tenant's room under max_queued
    tallies: Sequence[RunTally] | None = None  # every run it has made, over every repair


def current_runs(
    found: Iterable[Found], repair: int, repaired_tasks: Iterable[str]
) -> dict[str, list[Found]]:
    """Each task's runs of the latest repair that ran it, in ``found``'s order."""
    by_repair: dict[str, dict[int, list[Found]]] = defaultdict(lambda: defaultdict(list))
    for run in found:
        by_repair[run.task_name][run.repair].append(run)
    again = set(repaired_tasks)
    current: dict[str, list[Found]] = {}
    for task, repairs in by_repair.items():
        latest = max(repairs)
        if task in again and latest < repair:
            continue
        current[task] = repairs[latest]
    return current


def board_of(current: Mapping[str, Sequence[TaskInstance]]) -> dict[str, list[Instance]]:
    return {
        task: [Instance(run.map_index, RUN_STATES[run.state]) for run in runs]
        for task, runs in current.items()
    }


def tallied_board(current: Mapping[str, Sequence[RunTally]]) -> dict[str, list[Instance]]:
    """The board, each task's instances counted by state, in map-index order of each
    state's first instance (the order ``failed_tasks`` weighs them in)."""
    return {
        task: [
            Instance(run.map_index, run.state, run.number)
            for run in sorted(runs, key=lambda run: run.map_index)
        ]
        for task, runs in current.items()
    }


def outputs_of(
    current: Mapping[str, Sequence[TaskRunFact]],
) -> dict[str, list[tuple[int, Any]]]:
    return {task: [(run.map_index, run.output) for run in runs] for task, runs in current.items()}


def outputs_wanted(dag: Dag, board: Mapping[str, Sequence[Instance]]) -> set[str]:
    """The tasks whose outputs a walk may pass on, so the store reads only those: each on
    the board (``board_of``, ``tallied_board``) and upstream of a pending task the walk may
    decide — one whose rule no longer waits on the board as it is, or below one that may be
    decided in the same pass. A fan-out's join waiting on its instances reads none of their
    outputs as each ends."""
    may_decide: set[str] = set()
    for name in dag.order:
        if name in board:
            continue
        task = dag.tasks[name]
        if any(parent in may_decide for parent in task.depends_on) or (
            decide(task.trigger_rule, upstream_of(task, board)).verdict is not Verdict.WAIT
        ):
            may_decide.add(name)
    return {
        parent for name in may_decide for parent in dag.tasks[name].depends_on if parent in board
    }


def map_sources(
    spec: WorkflowSpec, outputs: Mapping[str, Sequence[tuple[int, Any]]]
) -> dict[str, Any]:
    """What pending mapped tasks read their lists from: an upstream task's output (a mapped
    upstream task's: the list of its instances' outputs)."""
    wanted = {
        source.task
        for task in spec.tasks
        if task.name not in outputs
        and (source := map_source(task)) is not None
        and source.task is not None
        and source.task in outputs
    }
    sources: dict[str, Any] = {}
    for task in wanted:
        ordered = sorted(outputs[task], key=lambda pair: pair[0])
        mapped = any(index >= 0 for index, _ in ordered)
        sources[task] = [output for _, output in ordered] if mapped else ordered[0][1]
    return sources


def walk(facts: WalkFacts, now: datetime, new_run_id: Callable[[], str]) -> Changes:
    """The pending tasks decided, their runs (held past the tenant's ``max_queued``), and
    the workflow run's end once every task has ended. Only a running run moves on."""
    if facts.state is not WorkflowRunState.RUNNING:
        return Changes()
    run = facts.workflow_run
    tallies = tally(facts.task_runs) if facts.tallies is None else facts.tallies
    board = tallied_board(current_runs(tallies, run.repair, facts.repaired_tasks))
    outputs = outputs_of(current_runs(facts.task_runs, run.repair, facts.repaired_tasks))
    made = sum(counted.number for counted in tallies)
    progress = advance(
        facts.dag, board, run.params, map_sources(facts.dag.spec, outputs),
        cancelling=facts.cancel_requested, made=made, outputs=outputs,
    )  # fmt: skip
    new_runs, _ = hold(
        build_task_runs(run, facts.dag.spec, progress.starts, now, new_run_id), facts.room
    )
    changes = _queued(new_runs)
    if progress.end is not None:
        end = workflow_run_transition(
            run.id, WorkflowRunState.RUNNING, progress.end.state, now,
            reason=progress.end.reason, cancel_requested=False,
        )  # fmt: skip
        changes += Changes(workflow_run_moves=(end,))
    return changes


def _queued(new_runs: Sequence[NewRun]) -> Changes:
    queued = any(new.state is RunState.QUEUED for new in new_runs)
    waiting = [new for new in new_runs if new.state.is_active]  # queued, or held
    notices = ({WORK} if queued else set()) | (
        {DUE} if any(new.start_deadline for new in waiting) else set()
    )
    return Changes(new_runs=tuple(new_runs), notices=frozenset(notices))
