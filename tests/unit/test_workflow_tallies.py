"""A walk decides on its runs counted by task, repair and state (the store's ``GROUP BY``)
exactly as it did on every run read whole: the same starts, inputs, waiting reasons (their
counts too) and end — the outputs read only for the tasks ``outputs_wanted`` names."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from herder.domain.states import RunState
from herder.domain.workflows.dag import Dag
from herder.domain.workflows.progress import advance
from herder.domain.workflows.spec import TaskSpec, WorkflowSpec
from herder.domain.workflows.trigger_rules import TriggerRule
from herder.domain.workflows.walk import (
    RunTally,
    TaskRunFact,
    board_of,
    current_runs,
    outputs_of,
    outputs_wanted,
    tallied_board,
    tally,
)

STATES = [
    RunState.QUEUED, RunState.RUNNING, RunState.SUCCEEDED, RunState.FAILED,
    RunState.TIMED_OUT, RunState.SKIPPED, RunState.UPSTREAM_FAILED, RunState.CANCELLED,
]  # fmt: skip


@st.composite
def walks(draw: st.DrawFn) -> tuple[WorkflowSpec, list[TaskRunFact], int, frozenset[str]]:
    """A random DAG, and runs of some of its tasks (a mapped task's several, in map-index
    order, as the store inserts them) over up to two repairs."""
    count = draw(st.integers(1, 7))
    tasks = []
    for index in range(count):
        parents = draw(st.sets(st.integers(0, index - 1), max_size=3)) if index else set()
        tasks.append(
            TaskSpec(
                name=f"t{index}",
                job="work",
                depends_on=[f"t{p}" for p in sorted(parents)],
                trigger_rule=draw(st.sampled_from(list(TriggerRule))),
            )
        )
    repair = draw(st.integers(0, 1))
    found: list[TaskRunFact] = []
    for task in tasks[: draw(st.integers(0, count))]:  # the rest are pending
        for made in range(draw(st.integers(0, repair)), repair + 1):
            instances = draw(st.integers(1, 6))
            for index in range(instances):
                map_index = index if instances > 1 else -1
                state = draw(st.sampled_from(STATES))
                found.append(TaskRunFact(task.name, map_index, made, state, [task.name, index]))
    repaired = frozenset(draw(st.sets(st.sampled_from([t.name for t in tasks]))))
    return WorkflowSpec(tasks=tasks), found, repair, repaired


@settings(max_examples=500, deadline=None)
@given(walks(), st.booleans())
def test_a_counted_board_decides_as_every_run_read_whole(
    drawn: tuple[WorkflowSpec, list[TaskRunFact], int, frozenset[str]], cancelling: bool
) -> None:
    spec, found, repair, repaired = drawn
    dag = Dag.of(spec)
    whole = current_runs(found, repair, repaired)
    before = advance(dag, board_of(whole), {}, {}, cancelling=cancelling, made=len(found),
                     outputs=outputs_of(whole))  # fmt: skip
    tallies = tally(found)
    board = tallied_board(current_runs(tallies, repair, repaired))
    wanted = outputs_wanted(dag, board)
    assert wanted == outputs_wanted(dag, board_of(whole))
    read = [run for run in found if run.task_name in wanted]
    after = advance(dag, board, {}, {}, cancelling=cancelling,
                    made=sum(t.number for t in tallies),
                    outputs=outputs_of(current_runs(read, repair, repaired)))  # fmt: skip
    assert after == before


def test_tally_counts_by_task_repair_and_state_with_the_first_map_index() -> None:
    found = [
        TaskRunFact("each", 0, 0, RunState.SUCCEEDED),
        TaskRunFact("each", 1, 0, RunState.RUNNING),
        TaskRunFact("each", 2, 0, RunState.SUCCEEDED),
        TaskRunFact("each", 0, 1, RunState.SUCCEEDED),
        TaskRunFact("join", -1, 0, RunState.QUEUED),
    ]
    assert sorted(tally(found)) == [
        RunTally("each", 0, 0, RunState.SUCCEEDED, 2),
        RunTally("each", 0, 1, RunState.SUCCEEDED, 1),
        RunTally("each", 1, 0, RunState.RUNNING, 1),
        RunTally("join", -1, 0, RunState.QUEUED, 1),
    ]
