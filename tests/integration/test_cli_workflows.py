"""``herder workflow …`` against the in-process API on both stores, its tasks ended by a
worker the test drives by hand."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from herder.cli import workflows
from herder.cli.ids import short_ids
from herder.client import ApiError, HerderClient
from tests.integration.conftest import Api, Herder
from tests.integration.test_workflows import Fleet, detail, job, run_of

PIPELINE: dict[str, Any] = {
    "name": "pipeline",
    "params": {"epochs": 1, "label": "nightly", "files": []},
    "tasks": [
        {"name": "train", "job": "work"},
        {"name": "evaluate", "job": "work", "depends_on": ["train"]},
        {"name": "publish", "job": "work", "depends_on": ["evaluate"]},
        {
            "name": "notify",
            "job": "work",
            "depends_on": ["train", "evaluate"],
            "trigger_rule": "one_failed",
        },
    ],
}


@pytest.fixture
def fleet(api: Api) -> Fleet:
    job(api, "work")
    return Fleet(api)


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def refused(result: Result) -> ApiError:
    """The API's refusal, as ``herder`` would print it (``error: …``) with exit code 1."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, ApiError), (result.output, result.exception)
    return result.exception


def body_file(tmp_path: Path, body: dict[str, Any], name: str = "flow.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(body))
    return str(path)


def created(herder: Herder, tmp_path: Path, body: dict[str, Any] = PIPELINE) -> dict[str, Any]:
    made: dict[str, Any] = json.loads(
        ok(herder("workflow", "create", "-f", body_file(tmp_path, body), "--json"))
    )
    return made


def started(herder: Herder, *args: str) -> dict[str, Any]:
    run: dict[str, Any] = json.loads(ok(herder("workflow", "run", *args, "--json")))
    return run


def test_a_workflow_is_created_from_a_file_listed_and_drawn(
    herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    assert "created workflow pipeline" in ok(
        herder("workflow", "create", "-f", body_file(tmp_path, PIPELINE))
    )
    listing = ok(herder("workflow", "list"))
    assert "pipeline" in listing
    assert "epochs, files, label" in listing

    drawn = ok(herder("workflow", "show", "pipeline"))
    assert "workflow: pipeline v1\ntasks: 4\n" in drawn
    assert "└─ notify ← train, evaluate  job work · one_failed" in drawn
    assert drawn.index("layer 2") < drawn.index("evaluate ← train") < drawn.index("layer 3")


def test_update_makes_a_new_version_only_from_the_version_read(
    herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    workflow = created(herder, tmp_path)
    changed = {key: value for key, value in PIPELINE.items() if key != "name"}
    changed["tasks"] = PIPELINE["tasks"][:2]
    path = body_file(tmp_path, changed, "changed.json")
    assert "to version 2" in ok(herder("workflow", "update", "pipeline", "-f", path))

    stale = refused(herder("workflow", "update", workflow["id"], "-f", path, "--if-version", "1"))
    assert stale.status == 412
    shown = json.loads(ok(herder("workflow", "show", "pipeline", "--json")))
    assert (shown["version"], len(shown["tasks"])) == (2, 2)


def test_a_run_takes_parameters_as_json_or_strings(
    herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    created(herder, tmp_path)
    run = started(
        herder, "pipeline", "--param", "epochs=3", "--param", "label=weekly run",
        "--param", 'files=["a.csv", "b.csv"]', "--idempotency-key", "nightly-1",
    )  # fmt: skip
    assert run["params"] == {"epochs": 3, "label": "weekly run", "files": ["a.csv", "b.csv"]}
    again = started(herder, "pipeline", "--idempotency-key", "nightly-1")
    assert again["id"] == run["id"]

    undeclared = refused(herder("workflow", "run", "pipeline", "--param", "speed=2"))
    assert "params.speed" in str(undeclared)
    assert "not a parameter" in str(undeclared)


def test_a_runs_dag_shows_the_failure_its_dependants_reason_and_run_ids(
    api: Api, herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    created(herder, tmp_path)
    run = started(herder, "pipeline")
    fleet.claim()
    fleet.end(run_of(api, run["id"], "train"), "failed")

    drawn = ok(herder("workflow", "show", run["id"]))
    assert f"{run['id']}\nworkflow: pipeline v1\nstate: running\n" in drawn
    tasks = detail(api, run["id"])["tasks"]
    shown = short_ids(task["run_id"] for task in tasks if task["run_id"])
    train, evaluate = run_of(api, run["id"], "train"), run_of(api, run["id"], "evaluate")
    assert len(shown[train]) < len(train)  # each run by its shortest start
    assert f"└─ train  failed: exit 1  {shown[train]}\n" in drawn  # for 'herder run logs …'
    assert train in ok(herder("run", "show", shown[train]))
    assert (
        "└─ evaluate ← train  upstream_failed: all_success cannot be met: 1 failed  "
        f"{shown[evaluate]}\n" in drawn
    )
    assert "├─ publish ← evaluate  upstream_failed: all_success cannot be met" in drawn
    assert "└─ notify ← train, evaluate  queued" in drawn

    listing = ok(herder("workflow", "runs", "pipeline", "--state", "running", "-q"))
    assert listing.splitlines() == [run["id"]]
    assert ok(herder("workflow", "runs", "--state", "succeeded", "-q")) == ""


HANDLED: dict[str, Any] = {
    "name": "handled",
    "tasks": [
        {"name": "train", "job": "work"},
        {"name": "evaluate", "job": "work", "depends_on": ["train"]},
        {"name": "notify", "job": "work", "depends_on": ["train"], "trigger_rule": "one_failed"},
        {"name": "cleanup", "job": "work", "depends_on": ["evaluate"], "trigger_rule": "all_done"},
    ],
}


def test_a_run_that_succeeded_with_handled_failures_says_so(
    api: Api, herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    created(herder, tmp_path, HANDLED)
    run = started(herder, "handled")
    fleet.claim()
    fleet.end(run_of(api, run["id"], "train"), "failed")
    for run_id in fleet.claim():  # notify and cleanup handle it
        fleet.end(run_id)

    drawn = ok(herder("workflow", "show", run["id"]))
    assert "workflow: handled v1\nstate: succeeded, 2 tasks failed and were handled\n" in drawn


def test_a_failed_run_is_repaired_with_the_token_it_was_read_at(
    api: Api, herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    created(herder, tmp_path, {**PIPELINE, "tasks": PIPELINE["tasks"][:3]})
    run = started(herder, "pipeline")
    fleet.claim()
    fleet.end(run_of(api, run["id"], "train"), "failed")
    assert detail(api, run["id"])["state"] == "failed"

    alone = herder("workflow", "repair", run["id"], "--task", "evaluate")
    assert "repairing" in ok(alone)  # evaluate alone: its upstream task is still failed
    ended = detail(api, run["id"])
    assert (ended["state"], ended["repair"]) == ("failed", 1)

    repaired = json.loads(
        ok(herder("workflow", "repair", run["id"], "--task", "train", "--dependents", "--json"))
    )
    assert (repaired["state"], repaired["repair"]) == ("running", 2)
    for task in ("train", "evaluate", "publish"):
        fleet.claim()
        fleet.end(run_of(api, run["id"], task))
    assert detail(api, run["id"])["state"] == "succeeded"
    assert "repairs: 2" in ok(herder("workflow", "show", run["id"]))


def test_a_running_workflow_run_is_cancelled(
    api: Api, herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    created(herder, tmp_path)
    run = started(herder, "pipeline")
    assert "cancelled" in ok(herder("workflow", "cancel", run["id"]))
    ended = detail(api, run["id"])
    assert ended["state"] == "cancelled"
    assert {task["state"] for task in ended["tasks"]} == {"cancelled"}


def test_wait_follows_the_run_to_its_end_and_exits_by_its_outcome(
    herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    created(
        herder, tmp_path,
        {"name": "fan", "params": {"files": []},
         "tasks": [{"name": "resize", "job": "work", "map_over": "params.files"}]},
    )  # fmt: skip
    skipped = herder("workflow", "run", "fan", "--wait")
    assert "succeeded" in ok(skipped)
    assert "resize  skipped: map_over params.files is an empty list" in skipped.output

    failed = herder("workflow", "run", "fan", "--param", "files=7", "--wait")
    assert failed.exit_code == 1
    assert "failed: map_over params.files is a number, not a list" in failed.output


def test_a_mapped_task_is_summed_up(api: Api, herder: Herder, fleet: Fleet, tmp_path: Path) -> None:
    created(
        herder, tmp_path,
        {"name": "fan", "params": {"files": ["a", "b", "c"]},
         "tasks": [{"name": "resize", "job": "work", "map_over": "params.files"}]},
    )  # fmt: skip
    run = started(herder, "fan")
    ended: list[str] = []
    while taken := fleet.claim():  # as many at once as the worker's room allows
        for run_id in taken:
            fleet.end(run_id, "succeeded" if ended else "failed")
            ended.append(run_id)
    drawn = ok(herder("workflow", "show", run["id"]))
    assert "└─ resize ×3  2 succeeded, 1 failed" in drawn  # noqa: RUF001
    shown = short_ids(ended)[ended[0]]  # its shortest start among the task's runs
    assert f"failed: exit 1  {shown}\n" in drawn


def test_a_cycle_in_the_file_is_refused_naming_the_field(
    herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    cycle = {
        "name": "loop",
        "tasks": [
            {"name": "a", "job": "work", "depends_on": ["b"]},
            {"name": "b", "job": "work", "depends_on": ["a"]},
        ],
    }
    error = refused(herder("workflow", "create", "-f", body_file(tmp_path, cycle)))
    assert error.status == 422
    assert "tasks.1.depends_on: the tasks' dependencies make a cycle: a → b → a" in str(error)


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        ("{not json", "flow.json", "while parsing a flow mapping"),
        ("[1, 2]", "flow.json", "must hold a mapping"),
        ("a: &a [*a, *a]", "flow.yaml", "flow.yaml"),
        (None, "missing.json", "cannot be read"),
    ],
)
def test_a_bad_file_is_refused_before_anything_is_sent(
    herder: Herder, tmp_path: Path, content: str | None, name: str, message: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    result = herder("workflow", "create", "-f", str(path))
    assert result.exit_code == 1
    assert message in result.output


def test_an_unknown_workflow_is_a_clear_error(herder: Herder) -> None:
    for command in (("show", "nope"), ("run", "nope"), ("runs", "nope"), ("delete", "nope")):
        error = refused(herder("workflow", *command))
        assert error.status == 404
        assert str(error) == "no workflow named 'nope' (HTTP 404)"


def test_another_tenants_workflow_run_is_not_found(
    api: Api, herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    created(herder, tmp_path)
    run = started(herder, "pipeline")
    outsider = api.other_tenant_key("team-b")
    for command in ("show", "cancel", "repair"):
        assert refused(herder("workflow", command, run["id"], key=outsider)).status == 404
    assert refused(herder("workflow", "show", "pipeline", key=outsider)).status == 404
    assert detail(api, run["id"])["state"] == "running"


def test_delete_removes_the_workflow(herder: Herder, fleet: Fleet, tmp_path: Path) -> None:
    created(herder, tmp_path)
    assert "deleted workflow pipeline" in ok(herder("workflow", "delete", "pipeline"))
    assert "pipeline" not in ok(herder("workflow", "list"))


def test_a_workflow_is_scheduled_and_backfilled_from_the_command_line(
    api: Api, herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    created(herder, tmp_path)
    schedule = json.loads(
        ok(herder("workflow", "schedule", "pipeline", "0 * * * *", "--name", "hourly", "--json"))
    )
    assert schedule["workflow_id"] is not None
    assert schedule["name"] == "hourly"
    window = ("--start", "2026-11-01T00:30:00Z", "--end", "2026-11-01T05:30:00Z")
    made = json.loads(
        ok(herder("workflow", "backfill", "pipeline", *window, "--max-active", "2", "--json"))
    )
    assert (made["state"], made["started"]) == ("running", 2)
    runs = api.http.get("/v1/workflow-runs", headers=api.admin).json()["items"]
    assert sorted(run["scheduled_for"][:16] for run in runs) == [
        "2026-11-01T01:00", "2026-11-01T02:00",
    ]  # fmt: skip
    naive = herder("schedule", "backfill", schedule["id"], "--start", "2026-11-01T00:30:00",
                   "--end", "2026-11-01T05:30:00Z")  # fmt: skip
    assert naive.exit_code == 1
    assert "needs an offset" in naive.output


def test_an_approval_is_drawn_waiting_and_decided_from_the_cli(
    herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    body = {
        "name": "release",
        "tasks": [
            {"name": "review", "approval": {"message": "ship it?"}},
            {"name": "ship", "job": "work", "depends_on": ["review"]},
        ],
    }
    created(herder, tmp_path, body)
    assert "review  approval" in ok(herder("workflow", "show", "release"))
    run = started(herder, "release")
    assert "waiting" in ok(herder("workflow", "show", run["id"]))
    said = ok(herder("workflow", "approve", run["id"], "review", "-m", "go"))
    assert f"approved task review of workflow run {run['id']}: the run is running" in said
    again = refused(herder("workflow", "reject", run["id"], "review"))
    assert again.status == 409
    assert detail(fleet.api, run["id"])["tasks"][1]["state"] == "queued"


REVIEWED = {
    "name": "train-and-publish",
    "params": {"dataset": "s3://ml/latest"},
    "tasks": [
        {
            "name": "review",
            "approval": {"message": "Publish the model trained on {params.dataset}?"},
        },
        {"name": "publish", "job": "work", "depends_on": ["review"]},
    ],
}


def test_a_waiting_approval_is_shown_with_its_message_filled_and_how_to_decide_it(
    herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    created(herder, tmp_path, REVIEWED)
    run = started(herder, "train-and-publish", "--param", "dataset=s3://ml/2026-12-06")
    (review,) = [task for task in detail(fleet.api, run["id"])["tasks"] if task["task"] == "review"]
    assert review["message"] == "Publish the model trained on s3://ml/2026-12-06?"
    shown = ok(herder("workflow", "show", run["id"]))
    assert "waiting for a decision:" in shown
    assert "review: Publish the model trained on s3://ml/2026-12-06?" in shown
    assert f"herder workflow approve {run['id']} review -m 'why'" in shown
    assert f"herder workflow reject {run['id']} review -m 'why'" in shown
    ok(herder("workflow", "approve", run["id"], "review"))
    assert "waiting for a decision" not in ok(herder("workflow", "show", run["id"]))


def test_a_message_naming_no_parameter_is_refused_naming_the_field(
    herder: Herder, fleet: Fleet, tmp_path: Path
) -> None:
    body = {**REVIEWED, "tasks": [{"name": "review", "approval": {"message": "on {dataset}?"}}]}
    wrong = refused(herder("workflow", "create", "-f", body_file(tmp_path, body)))
    assert (wrong.status, wrong.field) == (422, "tasks.0.approval.message")
    assert "{params.NAME}" in wrong.detail


def test_run_wait_says_an_approval_waits_and_ctrl_c_leaves_the_run_going(
    herder: Herder, fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    created(herder, tmp_path, REVIEWED)
    read = HerderClient.get_workflow_run
    reads: list[str] = []

    def interrupted_at_the_second_read(self: HerderClient, run_id: str) -> Any:
        reads.append(run_id)
        if len(reads) == 2:
            signal.raise_signal(signal.SIGINT)  # the person waiting presses Ctrl-C
        return read(self, run_id)

    monkeypatch.setattr(workflows, "POLL_SECONDS", 0.0)
    monkeypatch.setattr(HerderClient, "get_workflow_run", interrupted_at_the_second_read)
    waited = herder("workflow", "run", "train-and-publish", "--wait")
    assert waited.exit_code == 130, waited.output
    run_id = reads[0]
    assert "waiting for a decision on review: Publish the model trained on s3://ml/latest?" in (
        waited.stderr
    )
    assert f"herder workflow approve {run_id} review" in waited.stderr
    assert f"workflow run {run_id} goes on" in waited.stderr
    assert detail(fleet.api, run_id)["state"] == "running"
