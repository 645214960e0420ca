"""The DAG as the CLI draws it: layers by longest path, states and reasons, mapped tasks
summed up, 80 columns kept, a thousand tasks drawn."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from herder.cli.dag import DagTask, Instance, draw, layers


def task(name: str, *upstream: str, state: str | None = None, reason: str | None = None) -> DagTask:
    instances = (Instance(state, reason, f"run_{name}"),) if state else ()
    return DagTask(name, upstream, instances)


def drawn(tasks: list[DagTask], width: int = 80) -> list[str]:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(draw(tasks))
    return [line.rstrip() for line in console.export_text().splitlines()]


@pytest.mark.parametrize(
    ("tasks", "expected"),
    [
        pytest.param(
            [task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c")],
            [["a"], ["b", "c"], ["d"]],
            id="diamond",
        ),
        pytest.param(
            [task("c", "b"), task("b", "a"), task("a")],
            [["a"], ["b"], ["c"]],
            id="chain given backwards",
        ),
        pytest.param(
            [task("a"), task("b", "a"), task("c", "a", "b")],
            [["a"], ["b"], ["c"]],
            id="longest path wins over a shortcut",
        ),
        pytest.param(
            [task("x"), task("y"), task("z", "x")],
            [["x", "y"], ["z"]],
            id="two roots keep their order",
        ),
        pytest.param(
            [task("a", "ghost"), task("b", "a")],
            [["a"], ["b"]],
            id="an unknown upstream name is ignored",
        ),
        pytest.param([], [], id="nothing"),
    ],
)
def test_tasks_are_layered_by_their_longest_path_from_a_root(
    tasks: list[DagTask], expected: list[list[str]]
) -> None:
    assert [[t.name for t in layer] for layer in layers(tasks)] == expected


def test_each_task_shows_its_upstream_tasks_state_reason_and_run() -> None:
    lines = drawn(
        [
            task("train", state="failed", reason="exit code 1"),
            task("evaluate", "train", state="upstream_failed",
                 reason="all_success cannot be met: 1 failed"),
            task("publish", "evaluate", state="pending", reason="waiting on 1 of 1 upstream"),
        ]
    )  # fmt: skip
    assert lines == [
        "layer 1",
        "└─ train  failed: exit code 1  run_train",
        "layer 2",
        "└─ evaluate ← train  upstream_failed: all_success cannot be met: 1 failed",
        "   run_evaluate",
        "layer 3",
        "└─ publish ← evaluate  pending: waiting on 1 of 1 upstream  run_publish",
    ]


def test_states_are_coloured() -> None:
    console = Console(
        width=80, record=True, color_system="standard", force_terminal=True, file=io.StringIO()
    )
    console.print(draw([task("ok", state="succeeded"), task("bad", state="failed")]))
    styled = console.export_text(styles=True)
    assert "\x1b[32msucceeded\x1b[0m" in styled  # green
    assert "\x1b[1;31mfailed\x1b[0m" in styled  # bold red


def test_a_mapped_task_is_summed_up_with_its_failed_instances_named() -> None:
    instances = tuple(
        Instance("failed" if i in (3, 7) else "succeeded", "exit code 1", f"run_{i}", i)
        for i in range(1000)
    )
    lines = drawn([task("split"), DagTask("resize", ("split",), instances)])
    assert lines[3] == "└─ resize ×1000 ← split  998 succeeded, 2 failed"  # noqa: RUF001
    assert lines[4:] == [
        "      [3] failed: exit code 1  run_3",
        "      [7] failed: exit code 1  run_7",
    ]


def test_only_a_few_failed_instances_are_listed() -> None:
    instances = tuple(Instance("failed", None, f"run_{i}", i) for i in range(50))
    lines = drawn([DagTask("resize", (), instances)])
    assert lines[1] == "└─ resize ×50  50 failed"  # noqa: RUF001
    assert lines[-1] == "      … 47 more failed"
    assert len(lines) == 6


def test_a_definition_shows_what_each_task_runs() -> None:
    lines = drawn([DagTask("train", (), note="job train · one_failed")])
    assert lines == ["layer 1", "└─ train  job train · one_failed"]


def test_a_wide_fan_in_names_a_few_upstream_tasks() -> None:
    roots = [task(f"part-{i}", state="succeeded") for i in range(40)]
    join = task("join", *(t.name for t in roots), state="queued")
    lines = drawn([*roots, join])
    assert "└─ join ← part-0, part-1, part-2, part-3, part-4 +35 more  queued  run_join" in lines


@pytest.mark.parametrize(
    "tasks",
    [
        pytest.param([task(f"t{i}", *([f"t{i - 1}"] if i else []), state="succeeded",
                           reason=None) for i in range(1000)], id="a chain of 1000"),
        pytest.param([task("root", state="succeeded")]
                     + [task(f"leaf-{i}", "root", state="upstream_failed",
                             reason="all_success cannot be met: 1 failed, 2 skipped, 3 not ended")
                        for i in range(999)], id="a fan-out of 999"),
        pytest.param([task("a-very-long-task-name-" + "x" * 100, state="failed",
                           reason="a long reason " * 20)], id="longer than a line"),
    ],
)  # fmt: skip
def test_a_thousand_tasks_fit_80_columns(tasks: list[DagTask]) -> None:
    lines = drawn(tasks)
    assert all(len(line) <= 80 for line in lines)
    assert sum(line.startswith(("├─", "└─")) for line in lines) == len(tasks)
