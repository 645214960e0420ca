"""Suspending and resuming a workflow run, over plain facts: which states may do which, what a
suspended run starts (nothing), what it keeps (its ``max_active_runs`` slot), and how a
cancel ends one."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from herder.domain.errors import Conflict
from herder.domain.jobs import JobSpec
from herder.domain.queue_room import UNLIMITED
from herder.domain.state_tones import WORKFLOW_RUN_TONES
from herder.domain.states import RunState
from herder.domain.workflows.admission import SLOT_HOLDING, admission, admit
from herder.domain.workflows.cancel import cancel_workflow_run
from herder.domain.workflows.dag import Dag
from herder.domain.workflows.spec import Concurrency, TaskSpec, WorkflowSpec
from herder.domain.workflows.states import WORKFLOW_RUN_TRANSITIONS, WorkflowRunState
from herder.domain.workflows.suspend import resume_workflow_run, suspend_workflow_run
from herder.domain.workflows.task_runs import PinnedRun
from herder.domain.workflows.walk import TaskRunFact, WalkFacts, walk

NOW = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
JOB = {"id": "job_1", "spec": JobSpec(runtime="shell", command="true").model_dump(mode="json")}


@pytest.mark.parametrize(
    ("state", "cancel_requested", "target", "problem"),
    [
        (WorkflowRunState.RUNNING, False, WorkflowRunState.SUSPENDED, None),
        (WorkflowRunState.SUSPENDED, False, None, None),  # a second suspend changes nothing
        (WorkflowRunState.RUNNING, True, None, "being cancelled"),
        (WorkflowRunState.QUEUED, False, None, "has started nothing"),
        (WorkflowRunState.SUCCEEDED, False, None, "already succeeded"),
        (WorkflowRunState.FAILED, False, None, "already failed"),
        (WorkflowRunState.CANCELLED, False, None, "already cancelled"),
    ],
)
def test_suspend_a_workflow_run(
    state: WorkflowRunState,
    cancel_requested: bool,
    target: WorkflowRunState | None,
    problem: str | None,
) -> None:
    if problem is not None:
        with pytest.raises(Conflict, match=problem):
            suspend_workflow_run("wfrun_1", state, cancel_requested, NOW)
        return
    moves = suspend_workflow_run("wfrun_1", state, cancel_requested, NOW).workflow_run_moves
    assert [(move.source, move.target) for move in moves] == ([(state, target)] if target else [])


@pytest.mark.parametrize(
    ("state", "stopping", "problem"),
    [
        (WorkflowRunState.SUSPENDED, 0, None),
        (WorkflowRunState.SUSPENDED, 2, "2 task run\\(s\\) .* still being stopped"),
        (WorkflowRunState.RUNNING, 0, "running, not suspended"),  # a second resume
        (WorkflowRunState.QUEUED, 0, "queued, not suspended"),
        (WorkflowRunState.SUCCEEDED, 0, "succeeded, not suspended"),
    ],
)
def test_resume_a_workflow_run(state: WorkflowRunState, stopping: int, problem: str | None) -> None:
    if problem is not None:
        with pytest.raises(Conflict, match=problem):
            resume_workflow_run("wfrun_1", state, stopping, NOW)
        return
    (move,) = resume_workflow_run("wfrun_1", state, stopping, NOW).workflow_run_moves
    assert (move.source, move.target) == (WorkflowRunState.SUSPENDED, WorkflowRunState.RUNNING)
    assert "started_at" not in move.values  # it started long ago: a resume is not a start


def test_a_cancelled_suspended_run_runs_again_asked_to_stop() -> None:
    """The walk, which starts nothing for a run being cancelled, then ends it ``cancelled``
    once its task runs have ended — most at once: a suspended task run's cancel ends it."""
    (move,) = cancel_workflow_run("wfrun_1", WorkflowRunState.SUSPENDED, NOW).workflow_run_moves
    assert (move.source, move.target) == (WorkflowRunState.SUSPENDED, WorkflowRunState.RUNNING)
    assert move.values == {"cancel_requested": True}


def test_a_suspended_run_keeps_its_slot_under_max_active_runs() -> None:
    assert WorkflowRunState.SUSPENDED in SLOT_HOLDING
    assert WorkflowRunState.QUEUED not in SLOT_HOLDING
    # one running, one suspended, max 2: a new run queues, and no queued run is admitted
    assert admission(2, Concurrency.QUEUE, active=2) is WorkflowRunState.QUEUED
    assert admit(2, 2, ["wfrun_3"], NOW).empty


def walk_facts(state: WorkflowRunState, task_runs: list[TaskRunFact]) -> WalkFacts:
    workflow = WorkflowSpec(
        tasks=[TaskSpec(name="a", job="work"), TaskSpec(name="b", job="work", depends_on=["a"])]
    )
    pinned = PinnedRun("wfrun_1", "tenant", {}, {"work": JOB}, 0)
    return WalkFacts(pinned, state, frozenset(), False, Dag.of(workflow), task_runs, UNLIMITED)


def test_a_task_that_ends_while_suspended_starts_nothing_until_resumed() -> None:
    a_ended = [TaskRunFact("a", -1, 0, RunState.SUCCEEDED)]
    assert walk(walk_facts(WorkflowRunState.SUSPENDED, a_ended), NOW, lambda: "run_2").empty
    resumed = walk(walk_facts(WorkflowRunState.RUNNING, a_ended), NOW, lambda: "run_2")
    assert [(new.task.task_name, new.state) for new in resumed.new_runs if new.task] == [
        ("b", RunState.QUEUED)
    ]


def test_a_suspended_task_run_keeps_its_workflow_run_from_ending() -> None:
    task_runs = [
        TaskRunFact("a", -1, 0, RunState.SUCCEEDED),
        TaskRunFact("b", -1, 0, RunState.SUSPENDED),
    ]
    facts = walk_facts(WorkflowRunState.RUNNING, task_runs)
    assert walk(facts, NOW, lambda: "run_3").empty
    done = replace(facts, task_runs=[*task_runs[:1], TaskRunFact("b", -1, 0, RunState.SUCCEEDED)])
    (end,) = walk(done, NOW, lambda: "run_3").workflow_run_moves
    assert end.target is WorkflowRunState.SUCCEEDED


def documented_workflow_run_states() -> dict[str, list[str]]:
    """docs/workflows.md's table of workflow-run states: each state's cells after its name."""
    text = (Path(__file__).resolve().parents[2] / "docs/workflows.md").read_text()
    section = text[text.index("### Workflow-run states") :]
    section = section[: section.index("\n## ")]
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", section, re.MULTILINE)
    return {name: [cell.strip() for cell in cells.split(" | ")] for name, cells in rows}


def test_the_docs_draw_each_workflow_run_state_as_the_domain_does() -> None:
    documented = documented_workflow_run_states()
    assert list(documented) == list(WorkflowRunState)
    for state in WorkflowRunState:
        ended, tone, meaning, moves = documented[state]
        assert ended == ("yes" if state.is_terminal else "no"), state
        assert tone == WORKFLOW_RUN_TONES[state], state
        assert meaning, state
        assert set(re.findall(r"`(\w+)`", moves)) == set(WORKFLOW_RUN_TRANSITIONS[state]), state
