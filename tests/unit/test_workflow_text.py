"""One workflow's YAML checked without the store (``definitions/workflow_text.py``): each
problem at its line, the graph of what parsed, and a stored workflow written back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from herder.definitions.source import parse
from herder.definitions.workflow_text import MAX_PROBLEMS, _on_cycles, as_yaml, check
from herder.domain.workflows.models import Workflow
from herder.domain.workflows.spec import TaskSpec


def said(text: str) -> list[tuple[int, str]]:
    return [(problem.line, problem.path) for problem in check(text).problems]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: a\ntasks:\n- {name: x, job: j}\n", []),
        ("name: a\ntasks:\n- {name: x, job: j, depends_on: [y, z]}\n", [(3, "tasks.0.depends_on")]),
        (
            "name: a\ntasks:\n- {name: x, job: j}\n- {name: x, job: j}\n- {name: x, job: j}\n",
            [(4, "tasks.1.name"), (5, "tasks.2.name")],
        ),
        (
            "name: a\ntasks:\n- {name: x, job: j, map_over: y}\n"
            "- {name: z, job: j, depends_on: [q]}\n",
            [(3, "tasks.0.map_over"), (4, "tasks.1.depends_on")],
        ),
        ("name: a\ntasks:\n- {name: x, job: j, depends_on: [x]}\n", [(3, "tasks.0.depends_on")]),
        ("name: a\ntasks:\n- name: x\n  job: 7\n", [(4, "tasks.0.job")]),
        ("name: 2024\ntasks:\n- {name: x, job: j}\n", [(1, "name")]),
        ("tasks:\n- {name: x, job: j}\n", [(1, "name")]),
        ("name: a\ntasks: [\n", [(3, "")]),  # at the end the text ran out
        ("name: a\ntasks:\n- {name: x, job: j}\nconcurrency: never\n", [(4, "concurrency")]),
        ("", [(1, "")]),
    ],
)
def test_each_problem_is_at_its_line(text: str, expected: list[tuple[int, str]]) -> None:
    assert said(text) == expected


def test_a_valid_text_has_its_spec_and_name() -> None:
    draft = check("name: a\nparams: {n: 1}\ntasks:\n- {name: x, job: j}\n")
    assert draft.name == "a"
    assert draft.spec is not None
    assert draft.spec.params == {"n": 1}


def test_the_graph_follows_the_text_even_when_it_is_wrong() -> None:
    text = (
        "name: a\ntasks:\n- {name: x, job: j}\n- {name: y, wait: {seconds: 5}, depends_on: [x]}\n"
        "- {name: z, job: j, approval: {}, depends_on: [y, nowhere, 3]}\n- not a task\n"
    )
    draft = check(text)
    assert draft.spec is None
    graph = draft.graph
    assert [(task.name, task.kind, task.line) for task in graph.tasks] == [
        ("x", "job", 3),
        ("y", "wait", 4),
        ("z", "", 5),
    ]
    assert graph.edges == [("x", "y"), ("y", "z")]
    assert graph.cycle == []


@pytest.mark.parametrize(
    ("edges", "cycle"),
    [
        ([("a", "b"), ("b", "c")], []),
        ([("a", "b"), ("b", "a"), ("b", "c"), ("d", "a")], ["a", "b"]),
        ([("a", "a")], ["a"]),
        ([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")], ["a", "b", "c"]),
        (
            [("a", "b"), ("b", "a"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "d")],
            ["a", "b", "c", "d", "e"],
        ),
    ],
)
def test_the_tasks_on_a_cycle(edges: list[tuple[str, str]], cycle: list[str]) -> None:
    names = {name for edge in edges for name in edge}
    assert _on_cycles(names, edges) == cycle


def test_a_thousand_mistakes_are_told_the_first_fifty() -> None:
    tasks = "".join(f"- {{name: t{i}, job: j, depends_on: [ghost{i}]}}\n" for i in range(200))
    draft = check(f"name: a\ntasks:\n{tasks}")
    assert len(draft.problems) == MAX_PROBLEMS
    assert draft.problems[0].line == 3


@pytest.mark.parametrize(
    "text",
    [
        "when: 2001-02-30\n",
        "n: !!int abc\n",
        "n: !!float x\n",
        "a: 1\nb: \x07\n",
        "t: !!timestamp x\n",
    ],
)
def test_a_value_yaml_cannot_read_is_a_problem_not_an_exception(text: str) -> None:
    problem = parse(text, "f.yaml")
    assert not hasattr(problem, "data")
    assert str(problem).startswith("f.yaml:")


def test_a_stored_workflow_is_written_back_as_text_that_checks_the_same() -> None:
    now = datetime(2026, 12, 7, tzinfo=UTC)
    workflow = Workflow(
        id="wf_1", name="nightly", version=3, created_at=now, updated_at=now,
        tasks=[TaskSpec(name="a", job="j"), TaskSpec(name="b", job="j", depends_on=["a"])],
        params={"day": "today"}, max_active_runs=2, concurrency="queue",
    )  # fmt: skip
    text = as_yaml(workflow)
    assert text.startswith("name: nightly\ntasks:\n- name: a\n  job: j\n")
    draft = check(text)
    assert draft.problems == []
    assert draft.spec is not None
    assert draft.spec.tasks == workflow.tasks
    assert (draft.spec.params, draft.spec.max_active_runs) == ({"day": "today"}, 2)
