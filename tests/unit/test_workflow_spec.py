"""A workflow's DAG is checked whole: an order where every task follows its upstream tasks,
or the first problem, named."""

from __future__ import annotations

import graphlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from herder.domain.errors import Invalid
from herder.domain.workflows.spec import MAX_TASKS, WorkflowSpec, task_order
from herder.domain.workflows.trigger_rules import TriggerRule


def workflow(*tasks: tuple[str, list[str]]) -> WorkflowSpec:
    return WorkflowSpec.model_validate(
        {"tasks": [{"name": name, "job": "work", "depends_on": up} for name, up in tasks]}
    )


def test_tasks_come_after_their_upstream_tasks_in_the_order_given_where_it_allows() -> None:
    spec = workflow(("train", ["prepare"]), ("prepare", []), ("publish", ["evaluate"]),
                    ("evaluate", ["train"]), ("notify", []))  # fmt: skip
    assert task_order(spec) == ["prepare", "train", "evaluate", "publish", "notify"]


def test_a_cycle_is_refused_naming_it_in_the_direction_work_flows() -> None:
    spec = workflow(("a", ["c"]), ("b", ["a"]), ("c", ["b"]))
    with pytest.raises(Invalid) as refused:
        task_order(spec)
    assert refused.value.detail == "the tasks' dependencies make a cycle: a → b → c → a"
    assert refused.value.field == "tasks.1.depends_on"


def test_a_task_depending_on_itself_is_a_cycle() -> None:
    with pytest.raises(Invalid, match="make a cycle: a → a"):
        task_order(workflow(("a", ["a"])))


def test_an_unknown_upstream_task_is_refused_naming_the_field() -> None:
    with pytest.raises(Invalid) as refused:
        task_order(workflow(("a", []), ("b", ["a", "ghost"])))
    assert refused.value.field == "tasks.1.depends_on"
    assert "'ghost', which is not a task of this workflow" in refused.value.detail


def test_two_tasks_of_one_name_are_refused() -> None:
    with pytest.raises(Invalid) as refused:
        task_order(workflow(("a", []), ("b", []), ("a", [])))
    assert refused.value.field == "tasks.2.name"
    assert "tasks 0 and 2" in refused.value.detail


def test_a_chain_of_the_most_tasks_allowed_is_ordered_without_recursion() -> None:
    chain = [(f"t{i}", [f"t{i + 1}"] if i + 1 < MAX_TASKS else []) for i in range(MAX_TASKS)]
    assert task_order(workflow(*chain)) == [f"t{i}" for i in reversed(range(MAX_TASKS))]


@pytest.mark.parametrize(
    "body",
    [
        {"tasks": []},
        {"tasks": [{"name": f"t{i}", "job": "j"} for i in range(MAX_TASKS + 1)]},
        {"tasks": [{"name": "bad name", "job": "j"}]},
        {"tasks": [{"name": "a", "job": "j", "trigger_rule": "sometimes"}]},
        {"tasks": [{"name": "a", "job": "j", "timeout_seconds": 86401}]},
        {"tasks": [{"name": "a", "job": "j", "surprise": 1}]},
    ],
)
def test_a_malformed_workflow_is_refused_by_its_model(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        WorkflowSpec.model_validate(body)


def test_a_task_defaults_to_all_success() -> None:
    assert workflow(("a", [])).tasks[0].trigger_rule is TriggerRule.ALL_SUCCESS


EDGES = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=20)


@given(EDGES)
def test_any_graph_is_ordered_exactly_when_it_has_no_cycle(edges: list[tuple[int, int]]) -> None:
    """Edges are (child, parent); the standard library's graphlib is the referee."""
    parents: dict[str, list[str]] = {f"t{i}": [] for i in range(8)}
    for child, parent in edges:
        parents[f"t{child}"].append(f"t{parent}")
    spec = workflow(*parents.items())
    try:
        tuple(graphlib.TopologicalSorter(parents).static_order())
    except graphlib.CycleError:
        with pytest.raises(Invalid, match="make a cycle"):
            task_order(spec)
        return
    order = task_order(spec)
    position = {name: index for index, name in enumerate(order)}
    assert sorted(order) == sorted(parents)
    for child, parent in edges:
        assert position[f"t{parent}"] < position[f"t{child}"]
