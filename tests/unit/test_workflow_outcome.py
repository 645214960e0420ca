"""How a workflow run's end reads: a run that succeeded by Airflow's leaf rule with failed
tasks inside says how many it handled."""

from __future__ import annotations

import pytest

from herder.domain.states import RunState
from herder.domain.workflows.outcome import outcome
from herder.domain.workflows.progress import failed_tasks
from herder.domain.workflows.states import WorkflowRunState

S, F, UF = RunState.SUCCEEDED, RunState.FAILED, RunState.UPSTREAM_FAILED


@pytest.mark.parametrize(
    ("state", "instances", "expected"),
    [
        (WorkflowRunState.SUCCEEDED, [("a", S), ("b", S)], "succeeded"),
        (WorkflowRunState.SUCCEEDED, [("a", RunState.SKIPPED)], "succeeded"),
        (
            WorkflowRunState.SUCCEEDED,
            [("a", F), ("b", UF), ("notify", S)],
            "succeeded, 2 tasks failed and were handled",
        ),
        (
            WorkflowRunState.SUCCEEDED,
            [("a", RunState.TIMED_OUT), ("cleanup", S)],
            "succeeded, 1 task failed and was handled",
        ),
        # a mapped task with two failed instances is one task
        (
            WorkflowRunState.SUCCEEDED,
            [("m", F), ("m", F), ("n", S)],
            "succeeded, 1 task failed and was handled",
        ),
        (
            WorkflowRunState.FAILED,
            [("a", F), ("b", UF)],
            "failed",
        ),  # not handled: the state says it
        (WorkflowRunState.RUNNING, [("a", F), ("b", RunState.QUEUED)], "running"),
        (WorkflowRunState.CANCELLED, [("a", RunState.CANCELLED)], "cancelled"),
    ],
)
def test_outcome(
    state: WorkflowRunState, instances: list[tuple[str, RunState]], expected: str
) -> None:
    assert outcome(state, instances) == expected


@pytest.mark.parametrize(
    ("instances", "expected"),
    [
        ([], {}),
        ([("a", S), ("b", RunState.SKIPPED), ("c", RunState.RUNNING)], {}),
        ([("b", UF), ("a", F)], {"b": UF, "a": F}),  # in the order given
        ([("m", S), ("m", RunState.LOST), ("m", F)], {"m": RunState.LOST}),  # its first failure
        (
            [("a", RunState.CANCELLED), ("b", RunState.DEAD)],
            {"a": RunState.CANCELLED, "b": RunState.DEAD},
        ),
    ],
)
def test_failed_tasks(instances: list[tuple[str, RunState]], expected: dict[str, RunState]) -> None:
    assert failed_tasks(instances) == expected
