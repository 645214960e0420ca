"""A workflow run's progress, decided from its tasks' ends: any run ends with every task
ended, and no task starts before its trigger rule is met."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herder.domain.errors import Invalid
from herder.domain.states import RunState
from herder.domain.workflows.dag import Dag
from herder.domain.workflows.progress import (
    Instance,
    WorkflowRunState,
    advance,
    upstream_end,
)
from herder.domain.workflows.run_bound import (
    MAX_RUNS_PER_WORKFLOW_RUN,
    check_run_bound,
    runs_at_start,
)
from herder.domain.workflows.spec import TaskSpec, WorkflowSpec
from herder.domain.workflows.trigger_rules import TriggerRule, Upstream, Verdict, decide

ENDS = [RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT, RunState.CANCELLED]


@st.composite
def workflows(draw: st.DrawFn) -> WorkflowSpec:
    """A random DAG: each task depends on some of the tasks before it."""
    count = draw(st.integers(1, 8))
    tasks = []
    for index in range(count):
        parents = draw(st.sets(st.integers(0, index - 1), max_size=3)) if index else set()
        rule = draw(st.sampled_from(list(TriggerRule)))
        tasks.append(
            TaskSpec(
                name=f"t{index}",
                job="work",
                depends_on=[f"t{p}" for p in sorted(parents)],
                trigger_rule=rule,
            )
        )
    return WorkflowSpec(tasks=tasks)


def upstream(spec: WorkflowSpec, task: TaskSpec, board: dict[str, list[Instance]]) -> Upstream:
    return Upstream.of(
        upstream_end(instance.state) if instance else None
        for parent in task.depends_on
        for instance in board.get(parent, [None])
    )


@settings(max_examples=300, deadline=None)
@given(workflows(), st.data())
def test_any_run_ends_with_every_task_ended_and_none_started_early(
    spec: WorkflowSpec, data: st.DataObject
) -> None:
    board: dict[str, list[Instance]] = {}
    for _ in range(100):
        progress = advance(Dag.of(spec), board, {}, {})
        for start in progress.starts:
            assert start.task not in board  # decided once
            board[start.task] = [Instance(-1, start.state)]
        for start in progress.starts:
            task = spec.task(start.task)
            if start.state is RunState.QUEUED and task.trigger_rule is not TriggerRule.ALWAYS:
                assert decide(task.trigger_rule, upstream(spec, task, board)).verdict is Verdict.RUN
        if progress.end is not None:
            break
        running = sorted(name for name, (i,) in board.items() if i.state is RunState.QUEUED)
        assert running, "nothing runs, yet the run has not ended"
        name = data.draw(st.sampled_from(running))
        board[name] = [Instance(-1, data.draw(st.sampled_from(ENDS)))]
    assert progress.end is not None
    assert set(board) == {task.name for task in spec.tasks}
    assert all(i.state.is_terminal for instances in board.values() for i in instances)
    failed_leaf = any(
        board[leaf][0].state not in (RunState.SUCCEEDED, RunState.SKIPPED)
        for leaf in Dag.of(spec).leaves
    )
    expected = WorkflowRunState.FAILED if failed_leaf else WorkflowRunState.SUCCEEDED
    assert progress.end.state is expected


def chain(*rules: TriggerRule) -> WorkflowSpec:
    tasks: list[dict[str, Any]] = [{"name": "t0", "job": "work"}]
    for index, rule in enumerate(rules, start=1):
        tasks.append({"name": f"t{index}", "job": "work", "depends_on": [f"t{index - 1}"],
                      "trigger_rule": rule})  # fmt: skip
    return WorkflowSpec.model_validate({"tasks": tasks})


def test_a_failure_seals_the_whole_chain_below_it_in_one_pass() -> None:
    spec = chain(TriggerRule.ALL_SUCCESS, TriggerRule.ALL_SUCCESS, TriggerRule.ALL_DONE)
    progress = advance(Dag.of(spec), {"t0": [Instance(-1, RunState.FAILED)]}, {}, {})
    assert [(s.task, s.state) for s in progress.starts] == [
        ("t1", RunState.UPSTREAM_FAILED), ("t2", RunState.UPSTREAM_FAILED),
        ("t3", RunState.QUEUED),
    ]  # fmt: skip


def test_a_pending_task_says_what_it_waits_for() -> None:
    progress = advance(
        Dag.of(chain(TriggerRule.ALL_SUCCESS)), {"t0": [Instance(-1, RunState.RUNNING)]}, {}, {}
    )
    assert progress.waiting == {"t1": "waiting on 1 of 1 upstream task(s) (all_success)"}
    assert progress.end is None


def test_a_run_being_cancelled_starts_nothing_and_ends_cancelled() -> None:
    spec = chain(TriggerRule.ALWAYS)
    progress = advance(Dag.of(spec), {}, {}, {}, cancelling=True)
    assert progress.starts == []
    assert progress.end is not None
    assert progress.end.state is WorkflowRunState.CANCELLED


def test_a_mapped_upstream_task_counts_each_instance() -> None:
    spec = WorkflowSpec.model_validate(
        {
            "params": {"items": [1, 2]},
            "tasks": [
                {"name": "each", "job": "work", "map_over": "params.items"},
                {
                    "name": "join",
                    "job": "work",
                    "depends_on": ["each"],
                    "trigger_rule": "one_failed",
                },
            ],
        }
    )
    started = advance(Dag.of(spec), {}, {"items": [1, 2]}, {})
    assert [(s.task, s.items) for s in started.starts] == [("each", (1, 2))]
    half = {"each": [Instance(0, RunState.SUCCEEDED), Instance(1, RunState.FAILED)]}
    assert [s.task for s in advance(Dag.of(spec), half, {"items": [1, 2]}, {}).starts] == ["join"]


def test_a_list_in_an_upstream_output_is_mapped_and_its_absence_explained() -> None:
    spec = WorkflowSpec.model_validate(
        {
            "tasks": [
                {"name": "split", "job": "work"},
                {
                    "name": "each",
                    "job": "work",
                    "depends_on": ["split"],
                    "map_over": "split.parts",
                },
            ]
        }
    )
    board = {"split": [Instance(-1, RunState.SUCCEEDED)]}
    (start,) = advance(Dag.of(spec), board, {}, {"split": {"parts": ["x", "y"]}}).starts
    assert start.items == ("x", "y")
    (start,) = advance(Dag.of(spec), board, {}, {"split": {"rows": 3}}).starts
    assert (start.state, start.reason) == (
        RunState.FAILED,
        "map_over split.parts: there is no key 'parts'",
    )
    (start,) = advance(Dag.of(spec), board, {}, {"split": {"parts": list(range(1001))}}).starts
    assert start.state is RunState.FAILED
    assert "1,001 items" in start.reason


def test_a_fan_out_past_the_runs_a_workflow_run_may_make_fails_its_task_saying_why() -> None:
    spec = WorkflowSpec.model_validate(
        {
            "tasks": [
                {"name": "split", "job": "work"},
                {"name": "each", "job": "work", "depends_on": ["split"], "map_over": "split"},
            ]
        }
    )
    board = {"split": [Instance(-1, RunState.SUCCEEDED)]}
    sources = {"split": list(range(1000))}
    (fits,) = advance(
        Dag.of(spec), board, {}, sources, made=MAX_RUNS_PER_WORKFLOW_RUN - 1000
    ).starts
    assert (fits.state, len(fits.items or ())) == (RunState.QUEUED, 1000)
    (past,) = advance(Dag.of(spec), board, {}, sources, made=MAX_RUNS_PER_WORKFLOW_RUN - 999).starts
    assert past.state is RunState.FAILED
    assert past.reason == (
        "its 1,000 instance(s) would take the workflow run past 10,000 runs (it has made "
        "9,001); a workflow run makes at most 10,000"
    )


def test_the_runs_a_start_makes_are_counted_from_the_lists_it_maps_over() -> None:
    spec = WorkflowSpec.model_validate(
        {
            "params": {"items": [], "other": "x"},
            "tasks": [
                {"name": "first", "job": "work"},
                *(
                    {"name": f"each{n}", "job": "work", "map_over": "params.items"}
                    for n in range(11)
                ),
                {"name": "later", "job": "work", "depends_on": ["first"], "map_over": "first"},
            ],
        }
    )
    assert runs_at_start(spec, spec.params) == 13  # an empty list still makes a run
    assert runs_at_start(spec, {"items": list(range(1000))}) == 11_002
    with pytest.raises(Invalid) as refused:
        check_run_bound(spec, {"items": list(range(1000))})
    assert refused.value.field == "params"
    assert "11,002 runs" in refused.value.detail
    check_run_bound(spec, {"items": list(range(900))})  # 9,902: allowed
