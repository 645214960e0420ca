"""Repair in place: an ended workflow run runs tasks again under a new repair token — by
default every task that did not succeed or skip; with ``dependents``, everything downstream
of them too. The token is the run's ``repair`` as the caller last read it: two repairs from
one reading cannot both apply. Earlier runs of the repaired tasks stay in history."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from herder.domain.errors import Conflict, Invalid
from herder.domain.lifecycle.changes import Changes, workflow_run_transition
from herder.domain.states import RunState
from herder.domain.workflows.progress import Instance, upstream_end
from herder.domain.workflows.spec import WorkflowSpec
from herder.domain.workflows.states import WorkflowRunState
from herder.domain.workflows.trigger_rules import UpstreamEnd

DONE_RUN_STATES = frozenset(
    state for state in RunState if upstream_end(state) in (UpstreamEnd.SUCCESS, UpstreamEnd.SKIPPED)
)
"""A task instance that ended so (succeeded or skipped) is not run again by a repair that
names no tasks; the dashboard ticks the others."""


@dataclass(frozen=True)
class RepairFacts:
    workflow_run_id: str
    state: WorkflowRunState
    repair: int  # its latest-repair token now
    spec: WorkflowSpec
    board: Mapping[str, Sequence[Instance]]  # each task's current instances


@dataclass(frozen=True)
class RepairRequest:
    token: int  # the run's repair as the caller last read it
    tasks: Sequence[str] | None = None  # None: every task that did not succeed or skip
    dependents: bool = False


def repair(facts: RepairFacts, request: RepairRequest, now: datetime) -> Changes:
    """The ended run, at repair ``request.token``, runs the chosen tasks again (``Conflict``
    when it was repaired meanwhile, has not ended, or has nothing to repair)."""
    workflow_run_id, state, current_repair = facts.workflow_run_id, facts.state, facts.repair
    token = request.token
    if current_repair != token:
        raise Conflict(
            f"workflow run {workflow_run_id} is at repair {current_repair}, not {token}: it "
            "was repaired meanwhile; read it again",
            field="repair",
        )
    if not state.is_terminal:
        raise Conflict(
            f"workflow run {workflow_run_id} is still {state}; repair it once it has ended"
        )
    chosen = to_repair(facts.spec, facts.board, request.tasks, request.dependents)
    move = workflow_run_transition(
        workflow_run_id, state, WorkflowRunState.RUNNING, now, at_repair=token,
        repair=token + 1, repaired_tasks=sorted(chosen), cancel_requested=False,
    )  # fmt: skip
    return Changes(workflow_run_moves=(move,))


def to_repair(
    spec: WorkflowSpec,
    board: Mapping[str, Sequence[Instance]],
    tasks: Sequence[str] | None,
    dependents: bool,
) -> set[str]:
    """The tasks to run again: those named (``Invalid`` for one the workflow lacks), else
    every task with an instance that did not succeed or skip, or with none; with
    ``dependents``, everything downstream too (``Conflict`` when that is nothing)."""
    names = [task.name for task in spec.tasks]
    if tasks is not None:
        for position, name in enumerate(tasks):
            if name not in names:
                raise Invalid(f"{name!r} is not a task of this workflow", field=f"tasks.{position}")
        chosen = set(tasks)
    else:
        chosen = {
            name
            for name in names
            if name not in board
            or any(instance.state not in DONE_RUN_STATES for instance in board[name])
        }
    if dependents:
        chosen |= downstream(spec, chosen)
    if not chosen:
        raise Conflict("nothing to repair: every task succeeded or was skipped")
    return chosen


def downstream(spec: WorkflowSpec, roots: Collection[str]) -> set[str]:
    """Every task that depends on one of ``roots``, directly or through others."""
    children: dict[str, list[str]] = {task.name: [] for task in spec.tasks}
    for task in spec.tasks:
        for parent in task.depends_on:
            children[parent].append(task.name)
    found: set[str] = set()
    stack = list(roots)
    while stack:
        for child in children[stack.pop()]:
            if child not in found:
                found.add(child)
                stack.append(child)
    return found
