"""``herder apply`` and ``herder export`` against the in-process API, on both stores: jobs and
workflows and schedules as code."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

from typer.testing import Result

from tests.integration.conftest import Api, Herder

FILES = """
jobs:
  - name: prepare
    runtime: shell
    command: ./prepare.sh
    env: {STAGE: nightly}
  - name: train
    runtime: archive
    artifact: ./build/train.zip
    command: python train.py
    resources: {cpu: 2, memory_mb: 1024}
schedules:
  - name: nightly-prepare
    job: prepare
    cron: "0 3 * * *"
    timezone: Europe/Paris
"""


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def refused(result: Result) -> str:
    """Refused before any change: exit 2, the problems said without a traceback."""
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    return result.output


def write_files(directory: Path, text: str = FILES) -> Path:
    (directory / "build").mkdir(exist_ok=True)
    with zipfile.ZipFile(directory / "build" / "train.zip", "w") as archive:
        archive.writestr("train.py", "print('training')")
    path = directory / "herder.yaml"
    path.write_text(text)
    return path


def names(api: Api, what: str, key: str | None = None) -> list[str]:
    headers = api.as_key(key) if key else api.admin
    items = api.http.get(f"/v1/{what}", headers=headers).json()["items"]
    return sorted(item["name"] or "" for item in items)


def test_apply_creates_and_applying_again_changes_nothing(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = write_files(tmp_path)
    first = ok(herder("apply", "-f", str(path)))
    assert "+ job prepare" in first
    assert "+ schedule nightly-prepare" in first
    assert "uploaded 1 artifact(s)" in first
    assert names(api, "jobs") == ["prepare", "train"]
    assert names(api, "schedules") == ["nightly-prepare"]
    (schedule,) = api.http.get("/v1/schedules", headers=api.admin).json()["items"]
    assert schedule["spec"]["timezone"] == "Europe/Paris"

    second = ok(herder("apply", "-f", str(path)))
    assert "+ " not in second
    assert "~ " not in second
    assert "uploaded" not in second
    assert "│ jobs      │ 0       │ 0       │ 0       │ 2         │" in second
    assert "│ schedules │ 0       │ 0       │ 0       │ 1         │" in second
    job = api.http.get("/v1/jobs", headers=api.admin, params={"name": "prepare"}).json()
    assert job["items"][0]["version"] == 1


def test_one_changed_field_is_one_update_shown_by_dry_run_then_applied(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = write_files(tmp_path)
    ok(herder("apply", "-f", str(path)))
    path.write_text(FILES.replace("cpu: 2", "cpu: 4").replace('"0 3 * * *"', '"0 4 * * *"'))

    dry = ok(herder("apply", "-f", str(path), "--dry-run"))
    assert "~ job train" in dry
    assert "resources.cpu: 2.0 → 4.0" in dry
    assert 'cron: "0 3 * * *" → "0 4 * * *"' in dry
    assert "dry run: nothing was changed" in dry
    job = api.http.get("/v1/jobs", headers=api.admin, params={"name": "train"}).json()["items"][0]
    assert job["spec"]["resources"]["cpu"] == 2.0

    ok(herder("apply", "-f", str(path)))
    job = api.http.get("/v1/jobs", headers=api.admin, params={"name": "train"}).json()["items"][0]
    assert job["spec"]["resources"]["cpu"] == 4.0
    assert job["version"] == 2
    (schedule,) = api.http.get("/v1/schedules", headers=api.admin).json()["items"]
    assert schedule["spec"]["cron"] == "0 4 * * *"
    again = ok(herder("apply", "-f", str(path), "--dry-run"))
    assert "~ " not in again


def test_removing_a_field_resets_it_to_its_default(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = write_files(tmp_path)
    ok(herder("apply", "-f", str(path)))
    path.write_text(FILES.replace("    env: {STAGE: nightly}\n", ""))
    assert 'env.STAGE: "nightly" → (none)' in ok(herder("apply", "-f", str(path)))
    job = api.http.get("/v1/jobs", headers=api.admin, params={"name": "prepare"}).json()
    assert job["items"][0]["spec"]["env"] == {}


def test_prune_deletes_what_the_files_no_longer_name_and_only_with_prune(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = write_files(tmp_path)
    ok(herder("apply", "-f", str(path)))
    smaller = FILES.partition("schedules:")[0].replace("  - name: prepare", "  - name: keep", 1)
    path.write_text(smaller + "schedules: []\n")
    without = ok(herder("apply", "-f", str(path)))
    assert "- " not in without
    assert names(api, "jobs") == ["keep", "prepare", "train"]

    pruned = ok(herder("apply", "-f", str(path), "--prune"))
    assert "- schedule nightly-prepare" in pruned
    assert "- job prepare" in pruned
    assert names(api, "jobs") == ["keep", "train"]
    assert names(api, "schedules") == []


def test_prune_leaves_kinds_the_files_do_not_have_and_unnamed_schedules(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = write_files(tmp_path)
    ok(herder("apply", "-f", str(path)))
    job = api.create_job("by-hand")
    response = api.http.post(
        "/v1/schedules", headers=api.admin, json={"job_id": job["id"], "cron": "@daily"}
    )
    assert response.status_code == 201
    path.write_text("schedules: []\n")
    ok(herder("apply", "-f", str(path), "--prune"))
    assert names(api, "jobs") == ["by-hand", "prepare", "train"]
    assert names(api, "schedules") == [""]  # the unnamed one stays

    path.write_text("jobs: []\n")
    blocked = refused(herder("apply", "-f", str(path), "--prune"))
    assert "which --prune would delete" in blocked
    assert "nothing was changed" in blocked
    assert names(api, "jobs") == ["by-hand", "prepare", "train"]


def test_another_tenants_objects_are_untouched(api: Api, herder: Herder, tmp_path: Path) -> None:
    other = api.other_tenant_key("team-b")
    path = write_files(tmp_path)
    ok(herder("apply", "-f", str(path), key=other))
    ok(herder("apply", "-f", str(path)))
    path.write_text("jobs: []\nschedules: []\n")
    ok(herder("apply", "-f", str(path), "--prune"))
    assert names(api, "jobs") == []
    assert names(api, "jobs", key=other) == ["prepare", "train"]
    assert names(api, "schedules", key=other) == ["nightly-prepare"]


def test_an_artifact_is_uploaded_once_by_its_content(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = write_files(tmp_path)
    ok(herder("apply", "-f", str(path)))
    path.write_text(FILES.replace("name: train", "name: train-again"))
    second = ok(herder("apply", "-f", str(path)))
    assert "+ job train-again" in second
    assert "uploaded" not in second
    jobs = api.http.get("/v1/jobs", headers=api.admin).json()["items"]
    artifacts = {job["spec"]["artifact"] for job in jobs if job["spec"]["artifact"]}
    assert len(artifacts) == 1
    (sha256,) = artifacts
    assert api.http.get(f"/v1/artifacts/{sha256}", headers=api.admin).status_code == 200


def test_export_then_apply_shows_no_change(api: Api, herder: Herder, tmp_path: Path) -> None:
    path = write_files(tmp_path)
    ok(herder("apply", "-f", str(path)))
    (schedule,) = api.http.get("/v1/schedules", headers=api.admin).json()["items"]
    api.http.post(f"/v1/schedules/{schedule['id']}/pause", headers=api.admin)
    exported = tmp_path / "exported.yaml"
    ok(herder("export", "-o", str(exported)))
    text = exported.read_text()
    assert "paused: true" in text
    assert "artifact: " in text
    assert "./build" not in text
    dry = ok(herder("apply", "-f", str(exported), "--dry-run", "--prune"))
    assert "+ " not in dry
    assert "~ " not in dry
    assert "- " not in dry
    assert "│ schedules │ 0" in dry


def test_an_unnamed_schedule_is_exported_by_a_made_name_and_round_trips(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    job = api.create_job("by-hand")
    response = api.http.post(
        "/v1/schedules", headers=api.admin, json={"job_id": job["id"], "cron": "*/5 * * * *"}
    )
    made = f"by-hand-{response.json()['id'].lower()[-8:]}"
    exported = tmp_path / "exported.yaml"
    written = herder("export", "-o", str(exported))
    assert f"without a name written as {made}" in ok(written)
    assert f"name: {made}" in exported.read_text()

    dry = ok(herder("apply", "-f", str(exported), "--dry-run", "--prune"))
    assert not [line for line in dry.splitlines() if line[:2] in ("+ ", "~ ", "- ")], dry
    exported.write_text(exported.read_text().replace("*/5 * * * *", "*/10 * * * *"))
    changed = ok(herder("apply", "-f", str(exported)))
    assert f"~ schedule {made}" in changed
    (schedule,) = api.http.get("/v1/schedules", headers=api.admin).json()["items"]
    assert schedule["spec"]["cron"] == "*/10 * * * *"

    other = api.other_tenant_key("team-b")
    ok(herder("apply", "-f", str(exported), key=other))
    assert names(api, "schedules", key=other) == [made]


def test_a_bad_file_changes_nothing_and_names_the_place(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = write_files(tmp_path, FILES.replace("cpu: 2", "cpu: -2"))
    result = refused(herder("apply", "-f", str(path)))
    assert f"{path}:11: jobs[1].resources.cpu: Input should be greater than 0" in result
    assert names(api, "jobs") == []

    path.write_text(FILES + "  - name: nightly-prepare\n    job: prepare\n    cron: '@daily'\n")
    assert "a second schedule named 'nightly-prepare'" in refused(herder("apply", "-f", str(path)))
    path.write_text(FILES.replace("job: prepare", "job: nowhere"))
    assert "no job named 'nowhere'" in refused(herder("apply", "-f", str(path)))
    path.write_text("jobs:\n  - name: a\n    command: [\n")
    assert f"{path}:4" in refused(herder("apply", "-f", str(path)))
    assert names(api, "jobs") == []
    assert names(api, "schedules") == []


def secret_beside(project: Path) -> Path:
    """A key in ``.ssh`` beside the project directory, as ``~/.ssh`` is beside a checkout."""
    (project.parent / ".ssh").mkdir()
    secret = project.parent / ".ssh" / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    project.mkdir()
    return secret


def naming(project: Path, artifact: str) -> Path:
    path = project / "herder.yaml"
    path.write_text(f"jobs:\n  - name: leak\n    runtime: python\n    artifact: {artifact}\n")
    return path


def test_an_artifact_outside_the_project_is_refused_and_nothing_is_uploaded(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    secret = secret_beside(project)
    (project / "key").symlink_to(secret)
    sha256 = hashlib.sha256(secret.read_bytes()).hexdigest()
    for artifact in ("../.ssh/id_rsa", str(secret), "key"):
        path = naming(project, artifact)
        result = refused(herder("apply", "-f", str(path)))
        assert f"{path}:4: jobs[0].artifact: {artifact} " in result
        assert result.count("error:") == 2  # the problem, then "nothing was changed"
        assert api.http.get(f"/v1/artifacts/{sha256}", headers=api.admin).status_code == 404
    assert names(api, "jobs") == []


def test_allow_path_opens_a_directory_for_artifacts(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    secret = secret_beside(project)
    path = naming(project, "../.ssh/id_rsa")
    applied = ok(herder("apply", "-f", str(path), "--allow-path", str(secret.parent)))
    assert "uploaded 1 artifact(s)" in applied
    sha256 = hashlib.sha256(secret.read_bytes()).hexdigest()
    assert api.http.get(f"/v1/artifacts/{sha256}", headers=api.admin).status_code == 200
    assert names(api, "jobs") == ["leak"]


def test_a_file_nested_a_hundred_thousand_deep_is_one_line_not_a_traceback(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("jobs: " + "[" * 100_000)
    result = refused(herder("apply", "-f", str(path)))
    assert f"{path}:1: YAML syntax: nested deeper than 100 levels" in result
    assert names(api, "jobs") == []


def test_what_only_the_server_refuses_is_asked_before_any_change(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    missing = "ab" * 32
    path = write_files(
        tmp_path,
        FILES.replace("./build/train.zip", missing).replace('"0 3 * * *"', '"*/5 * * * * *"'),
    )
    result = refused(herder("apply", "-f", str(path)))
    assert f"jobs[1].artifact: no artifact {missing} on the server" in result
    assert "schedules[0].cron:" in result
    assert names(api, "jobs") == []


def test_a_directory_of_files_is_applied_as_one(api: Api, herder: Herder, tmp_path: Path) -> None:
    write_files(tmp_path)
    jobs, schedules = FILES.split("schedules:")
    (tmp_path / "herder.yaml").write_text(jobs)
    (tmp_path / "schedules.yml").write_text("schedules:" + schedules)
    ok(herder("apply", "-f", str(tmp_path)))
    assert names(api, "schedules") == ["nightly-prepare"]
    exported = json.dumps(ok(herder("export")))
    assert "nightly-prepare" in exported


WORKFLOW_FILES = """
jobs:
  - {name: step, runtime: shell, command: "true"}
workflows:
  - name: nightly
    params: {DAY: today}
    max_active_runs: 2
    tasks:
      - {name: prepare, job: step}
      - {name: train, job: step, depends_on: [prepare], timeout_seconds: 600}
      - {name: notify, job: step, depends_on: [train], trigger_rule: one_failed}
schedules:
  - name: nightly-run
    workflow: nightly
    cron: "0 3 * * *"
"""


def test_workflows_and_their_schedules_are_applied_and_exported(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = write_files(tmp_path, WORKFLOW_FILES)
    first = ok(herder("apply", "-f", str(path)))
    assert "+ workflow nightly" in first
    (workflow,) = api.http.get("/v1/workflows", headers=api.admin).json()["items"]
    assert [task["name"] for task in workflow["tasks"]] == ["prepare", "train", "notify"]
    (schedule,) = api.http.get("/v1/schedules", headers=api.admin).json()["items"]
    assert schedule["workflow_id"] == workflow["id"]
    assert schedule["job_id"] is None

    second = ok(herder("apply", "-f", str(path)))
    assert "+ " not in second
    assert "~ " not in second

    changed = path.read_text().replace("trigger_rule: one_failed", "trigger_rule: all_done")
    path.write_text(changed)
    third = ok(herder("apply", "-f", str(path)))
    assert "~ workflow nightly" in third
    (workflow,) = api.http.get("/v1/workflows", headers=api.admin).json()["items"]
    assert workflow["version"] == 2

    exported = tmp_path / "exported.yaml"
    ok(herder("export", "-o", str(exported)))
    again = ok(herder("apply", "--dry-run", "--prune", "-f", str(exported)))
    assert "+ " not in again
    assert "~ " not in again
    assert "- " not in again


def test_a_workflows_dry_run_is_a_field_level_diff_by_task_name(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    first = WORKFLOW_FILES.replace(
        "timeout_seconds: 600}", "timeout_seconds: 600, overrides: {env: {MODE: a}}}"
    )
    path = write_files(tmp_path, first)
    ok(herder("apply", "-f", str(path)))
    changed = first.replace("MODE: a", "MODE: b").replace(
        "      - {name: notify, job: step, depends_on: [train], trigger_rule: one_failed}\n",
        "      - {name: report, job: step, depends_on: [train], trigger_rule: all_done}\n",
    )
    path.write_text(changed)

    dry = ok(herder("apply", "-f", str(path), "--dry-run"))
    lines = dry.splitlines()
    assert "~ workflow nightly" in lines
    assert '    tasks.train.overrides.env.MODE: "a" → "b"' in lines
    assert "    tasks.notify: removed" in lines
    assert any(line.startswith('    tasks.report: added {"name": "report"') for line in lines)
    assert "'" not in dry  # no Python repr
    assert "null" not in dry  # no unset fields
    assert "None" not in dry

    ok(herder("apply", "-f", str(path)))
    assert "nothing to change" in ok(herder("apply", "-f", str(path), "--dry-run"))


def test_a_step_the_server_refuses_stops_apply_saying_what_was_done(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    """Only the server knows the registries it allows: the job before is made, and stays."""
    image = "registry.example/tools/x@sha256:" + "ab" * 32
    path = write_files(
        tmp_path,
        "jobs:\n  - {name: a, runtime: shell, command: x}\n"
        f"  - {{name: b, runtime: image, image: '{image}'}}\n",
    )
    result = herder("apply", "-f", str(path))
    said = " ".join(result.output.split())
    assert result.exit_code == 1, said
    assert "jobs[1]: image" in said
    assert "1 change(s) were made before it" in said
    assert names(api, "jobs") == ["a"]
