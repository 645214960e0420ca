"""The workflow-run decisions the store applies: admission under ``max_active_runs``, the
runs a walk builds (priority, start deadline, inputs too big), which tasks a repair runs
again, the current repair, and how a walk ends a run — each over plain facts."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from herder.domain.errors import Conflict, Invalid
from herder.domain.jobs import JobSpec, Priority
from herder.domain.overrides import RunOverrides
from herder.domain.queue_room import UNLIMITED, QueueRoom
from herder.domain.states import RunState
from herder.domain.workflows.admission import admission, admit
from herder.domain.workflows.cancel import cancel_workflow_run
from herder.domain.workflows.dag import Dag
from herder.domain.workflows.progress import Instance
from herder.domain.workflows.repair import (
    RepairFacts,
    RepairRequest,
    downstream,
    repair,
    to_repair,
)
from herder.domain.workflows.spec import Concurrency, TaskSpec, WorkflowSpec
from herder.domain.workflows.states import (
    WORKFLOW_RUN_TRANSITIONS,
    WorkflowRunState,
    check_workflow_run_transition,
)
from herder.domain.workflows.task_runs import MAX_INPUTS_BYTES, PinnedRun
from herder.domain.workflows.walk import (
    TaskRunFact,
    WalkFacts,
    board_of,
    current_runs,
    outputs_wanted,
    walk,
)

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
JOB = {"id": "job_1", "spec": JobSpec(runtime="shell", command="true").model_dump(mode="json")}


@pytest.mark.parametrize(
    ("max_active_runs", "concurrency", "active", "state"),
    [
        (None, Concurrency.QUEUE, 50, WorkflowRunState.RUNNING),
        (2, Concurrency.QUEUE, 1, WorkflowRunState.RUNNING),
        (2, Concurrency.QUEUE, 2, WorkflowRunState.QUEUED),
        (2, Concurrency.FORBID, 1, WorkflowRunState.RUNNING),
    ],
)
def test_admission(
    max_active_runs: int | None, concurrency: Concurrency, active: int, state: WorkflowRunState
) -> None:
    assert admission(max_active_runs, concurrency, active) is state


def test_admission_under_forbid_refuses_past_the_bound() -> None:
    with pytest.raises(Conflict, match="allows 2 active run"):
        admission(2, Concurrency.FORBID, 2)


@pytest.mark.parametrize(
    ("max_active_runs", "running", "queued", "started"),
    [
        (2, 1, ["a", "b"], ["a"]),
        (3, 0, ["a", "b"], ["a", "b"]),
        (2, 2, ["a"], []),
        (None, 5, ["a", "b"], ["a"]),  # the bound was lifted: one a run's end
    ],
)
def test_admit_starts_the_oldest_queued_runs_the_slots_take(
    max_active_runs: int | None, running: int, queued: list[str], started: list[str]
) -> None:
    moves = admit(max_active_runs, running, queued, NOW).workflow_run_moves
    assert [move.workflow_run_id for move in moves] == started
    assert all(move.target is WorkflowRunState.RUNNING for move in moves)
    assert all(move.values["started_at"] == NOW for move in moves)


@pytest.mark.parametrize(
    ("source", "target", "legal"),
    [
        (WorkflowRunState.QUEUED, WorkflowRunState.RUNNING, True),
        (WorkflowRunState.QUEUED, WorkflowRunState.SUCCEEDED, False),
        (WorkflowRunState.RUNNING, WorkflowRunState.FAILED, True),
        (WorkflowRunState.RUNNING, WorkflowRunState.QUEUED, False),
        (WorkflowRunState.FAILED, WorkflowRunState.RUNNING, True),  # a repair
        (WorkflowRunState.RUNNING, WorkflowRunState.SUSPENDED, True),
        (WorkflowRunState.SUSPENDED, WorkflowRunState.RUNNING, True),  # resumed, or cancelled
        (WorkflowRunState.SUSPENDED, WorkflowRunState.CANCELLED, False),  # through running
        (WorkflowRunState.QUEUED, WorkflowRunState.SUSPENDED, False),
        (WorkflowRunState.SUCCEEDED, WorkflowRunState.FAILED, False),
    ],
)
def test_workflow_run_transitions(
    source: WorkflowRunState, target: WorkflowRunState, legal: bool
) -> None:
    assert (target in WORKFLOW_RUN_TRANSITIONS[source]) is legal
    if not legal:
        with pytest.raises(Conflict):
            check_workflow_run_transition(source, target)


def test_every_workflow_run_state_has_its_transitions() -> None:
    assert set(WORKFLOW_RUN_TRANSITIONS) == set(WorkflowRunState)


def spec(*tasks: TaskSpec) -> WorkflowSpec:
    return WorkflowSpec(tasks=list(tasks))


def task(name: str, *parents: str, **fields: Any) -> TaskSpec:
    return TaskSpec(name=name, job="work", depends_on=list(parents), **fields)


def facts(
    workflow: WorkflowSpec,
    task_runs: list[TaskRunFact],
    *,
    backfill_id: str | None = None,
    room: QueueRoom = UNLIMITED,
    repair: int = 0,
    repaired: frozenset[str] = frozenset(),
    cancelling: bool = False,
) -> WalkFacts:
    pinned = PinnedRun("wfrun_1", "tenant", {}, {"work": JOB}, repair, backfill_id)
    return WalkFacts(pinned, WorkflowRunState.RUNNING, repaired, cancelling, Dag.of(workflow),
                     task_runs, room)  # fmt: skip


def ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"run_{next(counter)}"


def ended(name: str, state: RunState = RunState.SUCCEEDED, output: Any = None,
          repair: int = 0, map_index: int = -1) -> TaskRunFact:  # fmt: skip
    return TaskRunFact(name, map_index, repair, state, output)


def test_a_walk_starts_the_first_tasks_queued_with_their_deadline() -> None:
    overrides = RunOverrides(start_deadline_seconds=30)
    changes = walk(facts(spec(task("a", overrides=overrides), task("b", "a")), []), NOW, ids())
    (new,) = changes.new_runs
    assert (new.task and new.task.task_name, new.state) == ("a", RunState.QUEUED)
    assert new.start_deadline == NOW + timedelta(seconds=30)
    assert new.spec.priority is Priority.MEDIUM
    assert not changes.workflow_run_moves


@pytest.mark.parametrize(
    ("backfill_id", "priority"), [(None, Priority.MEDIUM), ("bkf_1", Priority.LOW)]
)
def test_a_backfills_task_runs_are_low_priority(
    backfill_id: str | None, priority: Priority
) -> None:
    (new,) = walk(facts(spec(task("a")), [], backfill_id=backfill_id), NOW, ids()).new_runs
    assert new.spec.priority is priority


def test_a_start_whose_inputs_are_too_big_fails_and_its_dependants_are_decided() -> None:
    huge = "x" * (MAX_INPUTS_BYTES + 1)
    workflow = spec(task("a"), task("b", "a"), task("c", "b"))
    changes = walk(facts(workflow, [ended("a", output=huge)]), NOW, ids())
    decided = {new.task.task_name: new for new in changes.new_runs if new.task}
    assert decided["b"].state is RunState.FAILED
    assert "bytes as JSON" in (decided["b"].reason or "")
    assert decided["c"].state is RunState.UPSTREAM_FAILED
    (end,) = changes.workflow_run_moves
    assert end.target is WorkflowRunState.FAILED


def test_a_started_task_gets_its_upstream_outputs() -> None:
    workflow = spec(task("a"), task("b", "a"))
    (new,) = walk(facts(workflow, [ended("a", output={"n": 1})]), NOW, ids()).new_runs
    assert new.task is not None
    assert new.task.inputs == {"a": {"n": 1}}


def test_starts_past_the_tenants_room_are_held() -> None:
    workflow = spec(task("a"), task("b"))
    changes = walk(facts(workflow, [], room=QueueRoom(max_queued=1, queued=0)), NOW, ids())
    assert [new.state for new in changes.new_runs] == [RunState.QUEUED, RunState.PENDING]


@pytest.mark.parametrize(
    ("states", "end"),
    [
        ([RunState.SUCCEEDED, RunState.SUCCEEDED], WorkflowRunState.SUCCEEDED),
        ([RunState.SUCCEEDED, RunState.FAILED], WorkflowRunState.FAILED),
        ([RunState.SUCCEEDED, RunState.RUNNING], None),
    ],
)
def test_a_walk_ends_the_run_once_every_task_has_ended(
    states: list[RunState], end: WorkflowRunState | None
) -> None:
    workflow = spec(task("a"), task("b", "a"))
    runs = [ended("a", states[0]), ended("b", states[1])]
    moves = walk(facts(workflow, runs), NOW, ids()).workflow_run_moves
    assert [move.target for move in moves] == ([end] if end else [])
    assert all(move.values["finished_at"] == NOW for move in moves)


def test_a_cancelled_run_ends_cancelled_once_its_tasks_have_ended() -> None:
    workflow = spec(task("a"), task("b", "a"))
    changes = walk(facts(workflow, [ended("a", RunState.CANCELLED)], cancelling=True), NOW, ids())
    assert not changes.new_runs
    assert [move.target for move in changes.workflow_run_moves] == [WorkflowRunState.CANCELLED]


def test_the_current_repair_is_each_tasks_latest_unless_repaired_again() -> None:
    found = [ended("a", repair=0), ended("b", RunState.FAILED, repair=0),
             ended("b", repair=1), ended("c", RunState.FAILED, repair=0)]  # fmt: skip
    current = current_runs(found, repair=2, repaired_tasks={"c"})
    assert {task: [run.repair for run in runs] for task, runs in current.items()} == {
        "a": [0],
        "b": [1],
    }  # c runs again in repair 2 and has not started: pending


def board(**states: RunState) -> dict[str, list[Instance]]:
    return {name: [Instance(-1, state)] for name, state in states.items()}


DIAMOND = spec(task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c"))


@pytest.mark.parametrize(
    ("tasks", "dependents", "chosen"),
    [
        (None, False, {"b", "d"}),
        (None, True, {"b", "d"}),
        (["a"], False, {"a"}),
        (["a"], True, {"a", "b", "c", "d"}),
        (["c"], True, {"c", "d"}),
    ],
)
def test_to_repair(tasks: list[str] | None, dependents: bool, chosen: set[str]) -> None:
    states = board(a=RunState.SUCCEEDED, b=RunState.FAILED, c=RunState.SKIPPED,
                   d=RunState.UPSTREAM_FAILED)  # fmt: skip
    assert to_repair(DIAMOND, states, tasks, dependents) == chosen


def test_to_repair_counts_a_task_that_never_ran() -> None:
    assert to_repair(DIAMOND, board(a=RunState.SUCCEEDED), None, False) == {"b", "c", "d"}


def test_to_repair_refuses_an_unknown_task_and_nothing_to_do() -> None:
    with pytest.raises(Invalid):
        to_repair(DIAMOND, {}, ["z"], False)
    done = board(a=RunState.SUCCEEDED, b=RunState.SUCCEEDED, c=RunState.SUCCEEDED,
                 d=RunState.SKIPPED)  # fmt: skip
    with pytest.raises(Conflict, match="nothing to repair"):
        to_repair(DIAMOND, done, None, False)


def test_downstream() -> None:
    assert downstream(DIAMOND, ["b"]) == {"d"}
    assert downstream(DIAMOND, ["a"]) == {"b", "c", "d"}


def repair_facts(state: WorkflowRunState, at: int) -> RepairFacts:
    return RepairFacts("wfrun_1", state, at, DIAMOND, board(a=RunState.FAILED))


def test_a_repair_runs_the_chosen_tasks_again_under_the_next_token() -> None:
    changes = repair(repair_facts(WorkflowRunState.FAILED, 3), RepairRequest(3), NOW)
    (move,) = changes.workflow_run_moves
    assert (move.source, move.target, move.at_repair) == (
        WorkflowRunState.FAILED,
        WorkflowRunState.RUNNING,
        3,
    )
    assert move.values["repair"] == 4
    assert move.values["repaired_tasks"] == ["a", "b", "c", "d"]
    assert move.values["finished_at"] is None


@pytest.mark.parametrize(
    ("state", "at", "problem"),
    [
        (WorkflowRunState.FAILED, 4, "repaired meanwhile"),
        (WorkflowRunState.RUNNING, 3, "still running"),
    ],
)
def test_a_repair_is_refused(state: WorkflowRunState, at: int, problem: str) -> None:
    with pytest.raises(Conflict, match=problem):
        repair(repair_facts(state, at), RepairRequest(3), NOW)


@pytest.mark.parametrize(
    ("state", "target", "values"),
    [
        (WorkflowRunState.QUEUED, WorkflowRunState.CANCELLED,
         {"reason": "cancelled before it started", "finished_at": NOW}),
        (WorkflowRunState.RUNNING, WorkflowRunState.RUNNING, {"cancel_requested": True}),
        (WorkflowRunState.SUSPENDED, WorkflowRunState.RUNNING, {"cancel_requested": True}),
        (WorkflowRunState.SUCCEEDED, None, None),
    ],
)  # fmt: skip
def test_cancel_a_workflow_run(
    state: WorkflowRunState, target: WorkflowRunState | None, values: dict[str, Any] | None
) -> None:
    moves = cancel_workflow_run("wfrun_1", state, NOW).workflow_run_moves
    assert [(move.target, dict(move.values)) for move in moves] == (
        [(target, values)] if target else []
    )


@pytest.mark.parametrize(
    ("found", "wanted"),
    [
        ([ended("a")], {"a"}),  # b may start: a's output is its input
        ([ended("a", RunState.RUNNING)], set()),  # b waits on a: nothing to pass on
        ([ended("a"), ended("b", RunState.RUNNING)], set()),
        ([ended("a"), ended("b")], {"b"}),
    ],
)
def test_only_the_outputs_a_start_may_pass_on_are_wanted(
    found: list[TaskRunFact], wanted: set[str]
) -> None:
    chain = Dag.of(spec(task("a"), task("b", "a"), task("c", "b")))
    assert outputs_wanted(chain, board_of(current_runs(found, 0, ()))) == wanted


def test_a_fan_outs_join_wants_no_output_while_its_instances_run() -> None:
    fan = Dag.of(spec(task("a"), task("join", "a")))
    instances = [ended("a", map_index=0), ended("a", RunState.RUNNING, map_index=1)]
    assert outputs_wanted(fan, board_of(current_runs(instances, 0, ()))) == set()
