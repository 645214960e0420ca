"""The plan: what applying the files would create, change field by field, delete (pruning
only the kinds the files manage) or leave alone — and what it refuses before any change."""

from __future__ import annotations

from typing import Any

import pytest

from herder.definitions.documents import Definition, Definitions
from herder.definitions.export import document
from herder.definitions.plan import ABSENT, Action, Change, Existing, describe, diff, plan
from herder.definitions.problems import DefinitionError, Kind, Where
from herder.domain.jobs import JobSpec
from herder.domain.schedules import ScheduleSpec, check_schedule_name
from herder.domain.workflows.spec import TaskSpec

HERE = Where("herder.yaml", 1, "jobs[0]")


def job_fields(**spec: Any) -> dict[str, Any]:
    return JobSpec.model_validate({"runtime": "shell", "command": "x", **spec}).model_dump(
        mode="json"
    )


def schedule_fields(
    job: str | None = "a", workflow: str | None = None, **spec: Any
) -> dict[str, Any]:
    dumped = ScheduleSpec.model_validate({"cron": "@daily", **spec}).model_dump(mode="json")
    return {"job": job, "workflow": workflow, "paused": False} | dumped


def declared(kinds: set[Kind], *items: tuple[Kind, str, dict[str, Any]]) -> Definitions:
    return Definitions(
        tuple(Definition(kind, name, fields, HERE) for kind, name, fields in items),
        frozenset(kinds),
    )


def have(kind: Kind, name: str | None, fields: dict[str, Any]) -> Existing:
    return Existing(kind, name, f"id_{name}", fields)


JOBS = {Kind.JOB}
BOTH = {Kind.JOB, Kind.SCHEDULE}


@pytest.mark.parametrize(
    ("files", "server", "prune", "expected"),
    [
        (declared(JOBS, (Kind.JOB, "a", job_fields())), [], False, [("create", "a")]),
        (
            declared(JOBS, (Kind.JOB, "a", job_fields())),
            [have(Kind.JOB, "a", job_fields())],
            False,
            [("unchanged", "a")],
        ),
        (
            declared(JOBS, (Kind.JOB, "a", job_fields(command="y"))),
            [have(Kind.JOB, "a", job_fields())],
            False,
            [("update", "a")],
        ),
        (declared(JOBS), [have(Kind.JOB, "old", job_fields())], False, []),
        (declared(JOBS), [have(Kind.JOB, "old", job_fields())], True, [("delete", "old")]),
        # a kind the files have no section for is never pruned
        (
            declared(JOBS, (Kind.JOB, "a", job_fields())),
            [have(Kind.JOB, "a", job_fields()), have(Kind.SCHEDULE, "s", schedule_fields())],
            True,
            [("unchanged", "a")],
        ),
        # an unnamed schedule is never pruned
        (
            declared(BOTH, (Kind.JOB, "a", job_fields())),
            [have(Kind.JOB, "a", job_fields()), have(Kind.SCHEDULE, None, schedule_fields())],
            True,
            [("unchanged", "a")],
        ),
        # jobs first; deletions last, schedules before jobs
        (
            declared(
                BOTH, (Kind.SCHEDULE, "s", schedule_fields("b")), (Kind.JOB, "b", job_fields())
            ),
            [have(Kind.JOB, "a", job_fields()), have(Kind.SCHEDULE, "old", schedule_fields("a"))],
            True,
            [("create", "b"), ("create", "s"), ("delete", "old"), ("delete", "a")],
        ),
    ],
)
def test_the_plan_creates_changes_deletes_and_leaves_alone(
    files: Definitions, server: list[Existing], prune: bool, expected: list[tuple[str, str]]
) -> None:
    steps = plan(files, server, prune=prune).steps
    assert [(str(step.action), step.name) for step in steps] == expected


def test_a_change_is_shown_field_by_field() -> None:
    before = job_fields(env={"A": "1"}, resources={"cpu": 1})
    after = job_fields(env={"B": "2"}, resources={"cpu": 2})
    assert list(diff(before, after)) == [
        Change("env.A", "1", ABSENT),
        Change("env.B", ABSENT, "2"),
        Change("resources.cpu", 1.0, 2.0),
    ]


def task(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "job": "j", "overrides": None, **fields}


@pytest.mark.parametrize(
    ("before", "after", "shown"),
    [
        ({"args": [{"job": "a"}]}, {"args": [{"job": "b"}]}, ['args[0].job: "a" → "b"']),
        ({"args": ["a"]}, {"args": []}, ['args: ["a"] → []']),
        ({"x": 1}, {"x": 1.0}, []),
        ({"x": 1}, {"x": True}, ["x: 1 → true"]),
        ({"x": None}, {"x": {}}, ["x: null → {}"]),
        ({"x": None}, {}, []),  # unset either way
        ({"env": {"A": "1"}}, {"env": {}}, ['env.A: "1" → (none)']),
        # a workflow's tasks, by name: in whatever order, a field deep inside one
        (
            {"tasks": [task("prepare"), task("train", overrides={"env": {"MODE": "a"}})]},
            {"tasks": [task("train", overrides={"env": {"MODE": "b"}}), task("prepare")]},
            ['tasks.train.overrides.env.MODE: "a" → "b"'],
        ),
        # set where it was unset: each field set, not the mapping's repr
        (
            {"tasks": [task("train")]},
            {"tasks": [task("train", overrides={"args": None, "env": {"MODE": "a"}})]},
            ['tasks.train.overrides.env.MODE: (none) → "a"'],
        ),
        # a task added or removed is one line, its unset fields left out
        (
            {"tasks": [task("train"), task("lint")]},
            {"tasks": [task("train"), task("report", depends_on=["train"])]},
            [
                "tasks.lint: removed",
                'tasks.report: added {"name": "report", "job": "j", "depends_on": ["train"]}',
            ],
        ),
        # a list that is not of named mappings is shown whole when its length changes
        ({"events": ["a"]}, {"events": ["a", "b"]}, ['events: ["a"] → ["a", "b"]']),
    ],
)
def test_diff_table(before: dict[str, Any], after: dict[str, Any], shown: list[str]) -> None:
    assert [describe(change) for change in diff(before, after)] == shown


def test_a_schedule_that_starts_another_job_is_replaced() -> None:
    files = declared(
        BOTH, (Kind.JOB, "b", job_fields()), (Kind.SCHEDULE, "s", schedule_fields("b"))
    )
    server = [
        have(Kind.JOB, "a", job_fields()),
        have(Kind.JOB, "b", job_fields()),
        have(Kind.SCHEDULE, "s", schedule_fields("a")),
    ]
    step = plan(files, server, prune=False).steps[-1]
    assert step.action is Action.UPDATE
    assert step.replaces


@pytest.mark.parametrize(
    ("files", "server", "prune", "message"),
    [
        (
            declared(BOTH, (Kind.SCHEDULE, "s", schedule_fields("ghost"))),
            [],
            False,
            "herder.yaml:1: jobs[0].job: no job named 'ghost' in the files or on the server",
        ),
        (
            declared(BOTH, (Kind.SCHEDULE, "s", schedule_fields("a"))),
            [have(Kind.JOB, "a", job_fields())],
            True,
            "no job named 'a'",
        ),
        (
            declared(JOBS),
            [have(Kind.JOB, "a", job_fields()), have(Kind.SCHEDULE, None, schedule_fields("a"))],
            True,
            "schedule id_None (unnamed) on the server runs job 'a', which --prune would delete",
        ),
        (
            declared(
                {Kind.WORKFLOW},
                (Kind.WORKFLOW, "w", {"tasks": [{"name": "t", "job": "ghost"}]}),
            ),
            [],
            False,
            "jobs[0].tasks[0].job: no job named 'ghost'",
        ),
        (
            declared(BOTH, (Kind.SCHEDULE, "s", schedule_fields(None, "ghost"))),
            [],
            False,
            "no workflow named 'ghost'",
        ),
        (
            declared(JOBS, (Kind.JOB, "a", job_fields(limits=[{"limit": "ghost", "key": "k"}]))),
            [],
            False,
            "jobs[0].limits[0].limit: no limit named 'ghost' in the files or on the server",
        ),
        (
            declared(
                {Kind.WORKFLOW},
                (
                    Kind.WORKFLOW,
                    "w",
                    {"tasks": [{"name": "t", "job": "t", "limits": [{"limit": "ghost"}]}]},
                ),
            ),
            [have(Kind.JOB, "t", job_fields())],
            False,
            "jobs[0].tasks[0].limits[0].limit: no limit named 'ghost'",
        ),
        (
            declared({Kind.LIMIT}),
            [
                have(Kind.LIMIT, "l", {"max_running": 1}),
                have(Kind.SCHEDULE, "s", schedule_fields(limits=[{"limit": "l", "key": "k"}])),
            ],
            True,
            "schedule 's' on the server names limit 'l', which --prune would delete: keep the "
            "limit in the files, or delete the schedule first",
        ),
    ],
)
def test_a_plan_leaving_a_dangling_name_is_refused(
    files: Definitions, server: list[Existing], prune: bool, message: str
) -> None:
    with pytest.raises(DefinitionError) as refused:
        plan(files, server, prune=prune)
    assert message in str(refused.value)


def waiting_workflow() -> dict[str, Any]:
    """A workflow whose tasks but one run no job: an approval, a timed wait, an event wait."""
    tasks = [
        {"name": "train", "job": "a"},
        {"name": "review", "approval": {"message": "ok?"}, "depends_on": ["train"]},
        {"name": "pause", "wait": {"seconds": 60}, "depends_on": ["review"]},
        {"name": "ready", "wait": {"event": {"name": "data.ready"}}, "depends_on": ["pause"]},
    ]
    return {"tasks": [TaskSpec.model_validate(task).model_dump(mode="json") for task in tasks]}


def test_a_schedule_its_job_would_refuse_is_refused_as_the_server_would() -> None:
    job = job_fields(parameters=[{"name": "DAY"}, {"name": "REGION", "default": "eu"}])
    schedule = schedule_fields("a", overrides={"params": {"REGION": "us"}})
    with pytest.raises(DefinitionError) as refused:
        plan(declared(BOTH, (Kind.JOB, "a", job), (Kind.SCHEDULE, "s", schedule)), [], prune=False)
    assert str(refused.value) == (
        "herder.yaml:1: jobs[0].overrides.params.DAY: parameter DAY is required (it has no default)"
    )
    given = schedule_fields("a", overrides={"params": {"DAY": "2026-12-06"}})
    files = declared(BOTH, (Kind.JOB, "a", job), (Kind.SCHEDULE, "s", given))
    assert [step.action for step in plan(files, [], prune=False).steps] == [Action.CREATE] * 2


def test_a_wait_or_an_approval_task_names_no_job() -> None:
    workflow = (Kind.WORKFLOW, "w", waiting_workflow())
    files = declared({Kind.JOB, Kind.WORKFLOW}, (Kind.JOB, "a", job_fields()), workflow)
    assert [step.action for step in plan(files, [], prune=True).steps] == [Action.CREATE] * 2

    server = [have(Kind.JOB, "a", job_fields()), have(*workflow)]
    jobs_only = plan(declared(JOBS, (Kind.JOB, "a", job_fields())), server, prune=True)
    assert [(step.action, step.name) for step in jobs_only.steps] == [(Action.UNCHANGED, "a")]
    with pytest.raises(DefinitionError) as refused:
        plan(declared(JOBS), server, prune=True)
    assert str(refused.value) == (
        "workflow 'w' on the server runs job 'a', which --prune would delete: keep the job in "
        "the files, or delete the workflow first"
    )


def test_an_export_planned_against_what_it_came_from_changes_nothing() -> None:
    server = [
        have(Kind.JOB, "a", job_fields(env={"A": "1"}, resources={"cpu": 0.5})),
        have(Kind.SCHEDULE, "s", schedule_fields("a", timezone="Europe/Paris") | {"paused": True}),
        have(Kind.SCHEDULE, None, schedule_fields("a")),
    ]
    exported = document(server, BOTH)
    assert exported["jobs"] == [{"name": "a", "runtime": "shell", "command": "x", "env": {"A": "1"},
                                 "resources": {"cpu": 0.5}}]  # fmt: skip
    assert exported["schedules"] == [
        {"name": "a-idnone", "job": "a", "cron": "@daily"},  # unnamed: named by job and id
        {"name": "s", "job": "a", "cron": "@daily", "timezone": "Europe/Paris", "paused": True},
    ]
    jobs = [(Kind.JOB, item.pop("name"), job_fields(**item)) for item in exported["jobs"]]
    schedules = [
        (
            Kind.SCHEDULE,
            item.pop("name"),
            schedule_fields(item.pop("job"))
            | {"paused": item.pop("paused", False)}
            | ScheduleSpec.model_validate(item).model_dump(mode="json"),
        )
        for item in exported["schedules"]
    ]
    steps = plan(declared(BOTH, *jobs, *schedules), server, prune=True).steps
    assert [step.action for step in steps] == [Action.UNCHANGED] * 3


def test_an_unnamed_schedule_is_known_by_what_it_runs_and_the_end_of_its_id() -> None:
    fields = schedule_fields("nightly-report")
    unnamed = Existing(Kind.SCHEDULE, None, "sch_01M8H5ZB8CEKN5PFMYWSBZPV28", fields)
    assert unnamed.known_as == "nightly-report-wsbzpv28"
    assert Existing(Kind.SCHEDULE, "mine", "sch_1", fields).known_as == "mine"
    of_a_workflow = Existing(Kind.SCHEDULE, None, "sch_1234567890", schedule_fields(None, "w"))
    assert of_a_workflow.known_as == "w-34567890"
    long = Existing(Kind.SCHEDULE, None, "sch_1234567890", schedule_fields("j" * 128))
    assert len(long.known_as) == 128
    assert check_schedule_name(long.known_as) == long.known_as


def test_a_file_naming_an_unnamed_schedule_so_updates_it_and_prune_keeps_the_others() -> None:
    server = [
        have(Kind.JOB, "a", job_fields()),
        Existing(Kind.SCHEDULE, None, "sch_0000000001", schedule_fields("a")),
        Existing(Kind.SCHEDULE, None, "sch_0000000002", schedule_fields("a")),
    ]
    files = declared(
        BOTH,
        (Kind.JOB, "a", job_fields()),
        (Kind.SCHEDULE, "a-00000001", schedule_fields("a", cron="@hourly")),
    )
    steps = plan(files, server, prune=True).steps
    assert [(step.action, step.name) for step in steps] == [
        (Action.UNCHANGED, "a"),
        (Action.UPDATE, "a-00000001"),
    ]
    assert steps[1].existing is not None
    assert steps[1].existing.id == "sch_0000000001"
