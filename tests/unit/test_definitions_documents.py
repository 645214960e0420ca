"""Definitions files: loaded into validated definitions, or refused with every problem named
by file, line and document path."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from herder.definitions.documents import load
from herder.definitions.problems import DefinitionError, Kind
from tests.images import busybox_image


def write(directory: Path, text: str, name: str = "herder.yaml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def problems(*paths: Path) -> list[str]:
    with pytest.raises(DefinitionError) as refused:
        load(list(paths))
    return [str(problem) for problem in refused.value.problems]


def test_jobs_schedules_and_workflows_load_with_defaults_filled_in(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
jobs:
  - name: prepare
    runtime: shell
    command: ./prepare.sh
workflows:
  - name: nightly
    tasks:
      - {name: a, job: prepare}
      - {name: b, job: prepare, depends_on: [a]}
schedules:
  - name: nightly-prepare
    job: prepare
    cron: "0 3 * * *"
    timezone: Europe/Paris
""",
    )
    definitions = load([path])
    assert definitions.kinds == {Kind.JOB, Kind.WORKFLOW, Kind.SCHEDULE}
    (job,) = definitions.of(Kind.JOB)
    assert job.fields["resources"]["cpu"] == 1.0
    assert job.where.line == 3
    (schedule,) = definitions.of(Kind.SCHEDULE)
    assert schedule.fields["job"] == "prepare"
    assert schedule.fields["workflow"] is None
    assert schedule.fields["paused"] is False
    (workflow,) = definitions.of(Kind.WORKFLOW)
    assert workflow.fields["tasks"][1]["depends_on"] == ["a"]
    assert workflow.fields["concurrency"] == "queue"


def test_a_wait_or_an_approval_task_loads_running_no_job(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
workflows:
  - name: gated
    tasks:
      - name: review
        approval: {message: "Go on?", timeout_seconds: 3600}
      - {name: pause, wait: {seconds: 60}, depends_on: [review]}
      - {name: ready, wait: {event: {name: data.ready}}, depends_on: [pause]}
""",
    )
    (workflow,) = load([path]).of(Kind.WORKFLOW)
    assert [task["job"] for task in workflow.fields["tasks"]] == [None, None, None]
    assert workflow.fields["tasks"][0]["approval"]["message"] == "Go on?"
    assert workflow.fields["tasks"][2]["wait"]["event"]["name"] == "data.ready"


def test_a_directory_is_every_yaml_file_in_it_sorted_and_an_empty_section_is_managed(
    tmp_path: Path,
) -> None:
    write(tmp_path, "jobs:\n  - {name: b, runtime: shell, command: b}\n", "b.yml")
    write(tmp_path, "jobs:\n  - {name: a, runtime: shell, command: a}\nschedules: []\n", "a.yaml")
    write(tmp_path, "not: yaml of ours", "notes.txt")
    definitions = load([tmp_path])
    assert [item.name for item in definitions.items] == ["a", "b"]
    assert definitions.kinds == {Kind.JOB, Kind.SCHEDULE}


def test_a_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "jobs:\n  - name: a\n    command: [unclosed\n")
    (problem,) = problems(path)
    assert problem.startswith(f"{path}:4:") or problem.startswith(f"{path}:3:")
    assert "YAML syntax" in problem


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "jobs:\n  - name: a\n    runtime: shell\n    command: x\n"
            "    resources:\n      cpu: -1\n",
            ":6: jobs[0].resources.cpu: Input should be greater than 0",
        ),
        (
            "jobs:\n  - name: a\n    runtime: shell\n    command: x\n    colour: red\n",
            ":5: jobs[0].colour: Extra inputs are not permitted",
        ),
        ("jobs:\n  - name: a\n    runtime: shell\n", ":2: jobs[0]: runtime shell needs a command"),
        ("jobs:\n  - runtime: shell\n    command: x\n", "jobs[0].name: a name is required"),
        ("jobs:\n  - name: 2024\n    runtime: shell\n    command: x\n", "must be a string"),
        ("jobs:\n  - {name: 'bad name', runtime: shell, command: x}\n", "jobs[0].name: name must"),
        ("job:\n  - {name: a}\n", ":1: job: unknown section 'job'"),
        ("jobs: {name: a}\n", ":1: jobs: jobs must be a list"),
        ("- just a list\n", "a mapping of limits, jobs, workflows, schedules, hooks, triggers"),
        (
            "schedules:\n  - name: s\n    job: a\n    cron: '61 * * * *'\n",
            ":4: schedules[0].cron:",
        ),
        (
            "schedules:\n  - name: s\n    job: a\n    cron: '@daily'\n    timezone: Mars/Olympus\n",
            ":5: schedules[0].timezone: unknown time zone",
        ),
        (
            "schedules:\n  - {name: s, job: a, workflow: w, cron: '@daily'}\n",
            "schedules[0]: name what it runs: a job or a workflow (one of them)",
        ),
        ("schedules:\n  - {name: s, cron: '@daily'}\n", "name what it runs"),
        ("schedules:\n  - {name: s, job: a, cron: '@daily', paused: maybe}\n", "paused must be"),
        (
            "workflows:\n  - name: w\n    tasks:\n      - {name: a, job: j, depends_on: [b]}\n"
            "      - {name: b, job: j, depends_on: [a]}\n",
            ":5: workflows[0].tasks[1].depends_on: the tasks' dependencies make a cycle",
        ),
        (
            "workflows:\n  - name: w\n    tasks:\n      - {name: a, job: j, trigger_rule: never}\n",
            ":4: workflows[0].tasks[0].trigger_rule: Input should be",
        ),
        ("workflows:\n  - {name: w, tasks: [], colour: red}\n", "workflows[0].colour: Extra"),
        (
            "workflows:\n  - name: w\n    tasks:\n"
            "      - {name: a, wait: {seconds: 60}, map_over: params.days}\n",
            ":4: workflows[0].tasks[0]: a wait task runs nothing: it takes no map_over",
        ),
        (
            "workflows:\n  - name: w\n    tasks:\n"
            "      - {name: a, job: j, map_over: params.days}\n",
            ":4: workflows[0].tasks[0].map_over: map_over names parameter 'days', which is not",
        ),
        (
            "workflows:\n  - name: w\n    params: {'no such': 1}\n    tasks: [{name: a, job: j}]\n",
            ":3: workflows[0].params: parameter 'no such'",
        ),
        (
            "jobs:\n  - name: a\n    runtime: shell\n    command: x\n    runtime: python\n",
            ":5: jobs[0]: 'runtime' is given twice",
        ),
    ],
)
def test_a_bad_value_is_named_by_file_line_and_document_path(
    tmp_path: Path, text: str, expected: str
) -> None:
    found = problems(write(tmp_path, text))
    assert any(expected in problem for problem in found), found


def test_every_problem_in_every_file_is_listed(tmp_path: Path) -> None:
    write(tmp_path, "jobs:\n  - {name: a, runtime: shell}\n", "1.yaml")
    write(tmp_path, "jobs:\n  - {name: b, runtime: shell, command: x, cpu: 2}\n", "2.yaml")
    assert len(problems(tmp_path)) == 2


def test_duplicate_names_are_refused_naming_both_places(tmp_path: Path) -> None:
    write(tmp_path, "jobs:\n  - {name: a, runtime: shell, command: x}\n", "1.yaml")
    write(tmp_path, "jobs:\n\n  - {name: a, runtime: shell, command: y}\n", "2.yaml")
    (problem,) = problems(tmp_path)
    assert problem.startswith(f"{tmp_path / '2.yaml'}:3: jobs[0]: a second job named 'a'")
    assert f"{tmp_path / '1.yaml'}:2" in problem


def test_the_same_name_in_two_kinds_is_fine(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "jobs:\n  - {name: a, runtime: shell, command: x}\n"
        "schedules:\n  - {name: a, job: a, cron: '@daily'}\n",
    )
    assert len(load([path]).items) == 2


def test_a_local_artifact_is_hashed_relative_to_its_file(tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    archive = tmp_path / "build" / "train.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("train.py", "print('hi')")
    (tmp_path / "conf").mkdir()
    path = write(
        tmp_path / "conf",
        "jobs:\n  - {name: t, runtime: archive, artifact: ../build/train.zip, command: x}\n",
    )
    (job,) = load([path], allowed=[tmp_path / "build"]).items
    assert job.fields["artifact"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert job.artifact_file == archive.resolve()


def artifact_problems(directory: Path, artifact: str, allowed: list[Path] | None = None) -> str:
    """The one problem of a job in ``directory`` naming ``artifact``."""
    path = write(directory, f"jobs:\n  - {{name: a, runtime: python, artifact: '{artifact}'}}\n")
    with pytest.raises(DefinitionError) as refused:
        load([path], allowed=allowed or [])
    (problem,) = refused.value.problems
    return str(problem)


def secret_outside(tmp_path: Path) -> tuple[Path, Path]:
    """A project directory, and a secret file beside it (as ~/.ssh/id_rsa is to a checkout)."""
    (tmp_path / ".ssh").mkdir()
    secret = tmp_path / ".ssh" / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    project = tmp_path / "project"
    (project / "jobs").mkdir(parents=True)
    return project, secret


@pytest.mark.parametrize(
    ("artifact", "reason"),
    [
        ("../../.ssh/id_rsa", "leaves the directory"),
        ("../jobs/../../.ssh/id_rsa", "leaves the directory"),
        ("{secret}", "is an absolute path outside every --allow-path directory"),
        ("link", "leaves the directory"),  # a symlink to the secret
        ("linked/id_rsa", "leaves the directory"),  # through a symlinked directory
    ],
)
def test_an_artifact_outside_the_files_directory_is_refused_naming_file_and_field(
    tmp_path: Path, artifact: str, reason: str
) -> None:
    project, secret = secret_outside(tmp_path)
    jobs = project / "jobs"
    (jobs / "link").symlink_to(secret)
    (jobs / "linked").symlink_to(secret.parent, target_is_directory=True)
    named = artifact.format(secret=secret)
    problem = artifact_problems(jobs, named)
    assert problem.startswith(f"{jobs / 'herder.yaml'}:2: jobs[0].artifact: {named} {reason}")
    assert "--allow-path DIR" in problem


def test_a_path_that_stays_inside_is_fine_and_allow_path_opens_another_directory(
    tmp_path: Path,
) -> None:
    project, secret = secret_outside(tmp_path)
    jobs = project / "jobs"
    (jobs / "run.sh").write_text("echo hi\n")
    (jobs / "inside").symlink_to(jobs / "run.sh")
    for artifact in ("run.sh", "./sub/../run.sh", "inside", str(jobs / "run.sh")):
        (jobs / "sub").mkdir(exist_ok=True)
        path = write(jobs, f"jobs:\n  - {{name: a, runtime: python, artifact: '{artifact}'}}\n")
        allowed = [jobs] if artifact.startswith("/") else []
        (job,) = load([path], allowed=allowed).items
        assert job.artifact_file == (jobs / "run.sh").resolve()
    for artifact in ("../../.ssh/id_rsa", str(secret)):
        path = write(jobs, f"jobs:\n  - {{name: a, runtime: python, artifact: '{artifact}'}}\n")
        (job,) = load([path], allowed=[secret.parent]).items
        assert job.artifact_file == secret.resolve()
    assert "leaves the directory" in artifact_problems(jobs, "../../.ssh/id_rsa", [project])


def test_an_artifact_path_that_cannot_be_resolved_is_named(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert "jobs[0].artifact: loop" in artifact_problems(tmp_path, "loop")


def test_a_missing_or_wrong_artifact_is_named(tmp_path: Path) -> None:
    (tmp_path / "plain.txt").write_text("not an archive")
    path = write(
        tmp_path,
        "jobs:\n  - {name: a, runtime: python, artifact: nowhere.py}\n"
        "  - {name: b, runtime: archive, artifact: plain.txt, command: x}\n",
    )
    found = problems(path)
    assert any(":2: jobs[0].artifact: no artifact file" in problem for problem in found)
    assert any(":3: jobs[1].artifact: runtime archive needs" in problem for problem in found)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    assert problems(tmp_path / "nope.yaml") == [
        f"{tmp_path / 'nope.yaml'}: no such file or directory"
    ]


@pytest.mark.timeout(10)
def test_aliases_that_expand_exponentially_are_refused_quickly(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    (problem,) = problems(write(tmp_path, "\n".join(lines) + "\n"))
    assert "aliases expand" in problem


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    (problem,) = problems(write(tmp_path, "jobs: &loop [*loop]\n"))
    assert "aliases expand" in problem or "must be a mapping" in problem


@pytest.mark.parametrize("opening", ["[", "{a: ", "- "])
def test_a_document_nested_past_the_bound_is_one_problem_not_a_crash(
    tmp_path: Path, opening: str
) -> None:
    text = "jobs: " + opening * 100_000 if opening != "- " else "jobs:\n" + "- " * 100_000 + "x\n"
    (problem,) = problems(write(tmp_path, text))
    assert problem.startswith(f"{tmp_path / 'herder.yaml'}:")
    assert "nested deeper than 100 levels" in problem


def test_an_image_job_takes_a_local_image_archive_or_a_reference(tmp_path: Path) -> None:
    (tmp_path / "busybox.tar").write_bytes(busybox_image().oci_archive())
    (tmp_path / "plain.txt").write_text("not an image")
    reference = "registry.internal/tools/busybox@sha256:" + "ab" * 32
    path = write(
        tmp_path,
        "jobs:\n  - {name: a, runtime: image, artifact: busybox.tar}\n"
        f"  - {{name: b, runtime: image, image: '{reference}', command: 'echo hi'}}\n",
    )
    first, second = load([path], allowed=[tmp_path]).items
    assert first.artifact_file == (tmp_path / "busybox.tar").resolve()
    assert second.fields["image"] == reference
    wrong = write(tmp_path, "jobs:\n  - {name: c, runtime: image, artifact: plain.txt}\n")
    assert any("runtime image needs an image archive" in problem for problem in problems(wrong))
