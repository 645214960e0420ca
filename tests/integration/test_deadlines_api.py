"""Deadlines over the API and the CLI: a deadline out of bounds is a 422 naming its field on
jobs, schedules and workflows; a run's and a workflow run's JSON carry its deadline, and
``herder run show`` tells it, and that it was missed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from herder.control.reaper import Reaper
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.integration.conftest import Api, Herder
from tests.integration.test_cli_runs import ok
from tests.integration.test_workflows import job, workflow

WEEK = 7 * 86400


@pytest.mark.parametrize(
    ("deadline", "field"),
    [
        ({"within_seconds": 0}, "deadline.within_seconds"),
        ({"within_seconds": WEEK + 1}, "deadline.within_seconds"),
        ({"within_seconds": "5h"}, "deadline.within_seconds"),
        ({"within_seconds": 60, "by": "07:00"}, "deadline.by"),
        ({"cancel": True}, "deadline.within_seconds"),
        ("5h", "deadline"),
    ],
)
def test_a_deadline_out_of_bounds_is_a_422_naming_its_field_everywhere(
    api: Api, deadline: Any, field: str
) -> None:
    job_id = api.create_job("target")["id"]
    bodies = {
        "/v1/jobs": {"name": "j", "runtime": "shell", "command": "true"},
        "/v1/schedules": {"job_id": job_id, "cron": "0 2 * * *"},
        "/v1/workflows": {"name": "wf", "tasks": [{"name": "a", "job": "target"}]},
    }
    for path, body in bodies.items():
        response = api.http.post(path, headers=api.admin, json=body | {"deadline": deadline})
        assert response.status_code == 422, (path, response.text)
        problem = response.json()
        fields = [problem.get("field")] + [error["field"] for error in problem.get("errors", [])]
        assert field in fields, (path, problem)


def test_runs_and_workflow_runs_show_their_deadline(api: Api, herder: Herder) -> None:
    created = api.create_job("report", deadline={"within_seconds": 3600, "cancel": True})
    assert created["spec"]["deadline"] == {"within_seconds": 3600, "cancel": True}
    run = api.start_run(created["id"])
    made = datetime.fromisoformat(run["created_at"])
    assert datetime.fromisoformat(run["deadline_at"]) == made + timedelta(hours=1)
    assert api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()["deadline_at"]
    shown = ok(herder("run", "show", run["id"]))
    assert f"deadline: {made + timedelta(hours=1):%Y-%m-%d %H:%M:%S}\n" in shown

    later = ManualClock(datetime.now(UTC) + timedelta(hours=2))
    store = Store(api.store.database.url, clock=later)
    try:
        Reaper(store, later, heartbeat_timeout_seconds=3600).step()
    finally:
        store.close()
    shown = ok(herder("run", "show", run["id"]))
    assert f", missed (unfinished at {later.now():%Y-%m-%d %H:%M:%S})" in shown
    assert "cancelled" in json.loads(ok(herder("run", "show", run["id"], "--json")))["state"]

    job(api, "step")
    flow = workflow(api, "nightly", tasks=[{"name": "a", "job": "step"}],
                    deadline={"within_seconds": 600})  # fmt: skip
    assert flow["deadline"] == {"within_seconds": 600, "cancel": False}
    started = api.http.post(f"/v1/workflows/{flow['id']}/runs", headers=api.admin, json={})
    assert started.status_code == 201, started.text
    body = started.json()
    assert body["deadline"] == {"within_seconds": 600, "cancel": False}
    assert "deadline: 10min\n" in ok(herder("workflow", "show", "nightly"))
    assert "deadline: " in ok(herder("workflow", "show", body["id"]))
    assert datetime.fromisoformat(body["deadline_at"]) == datetime.fromisoformat(
        body["created_at"]
    ) + timedelta(seconds=600)


DEADLINE_FILES = """
jobs:
  - name: nightly-report
    runtime: shell
    command: ./report.sh
    deadline: {within_seconds: 3600}
workflows:
  - name: etl
    tasks:
      - {name: report, job: nightly-report}
    deadline: {within_seconds: 7200, cancel: true}
schedules:
  - name: nightly
    job: nightly-report
    cron: "0 2 * * *"
    timezone: Europe/Paris
    deadline: {within_seconds: 18000}
"""


def test_apply_and_export_round_trip_deadlines(api: Api, herder: Herder, tmp_path: Path) -> None:
    path = tmp_path / "herder.yaml"
    path.write_text(DEADLINE_FILES)
    ok(herder("apply", "-f", str(path)))
    (job_item,) = api.http.get("/v1/jobs", headers=api.admin).json()["items"]
    (flow,) = api.http.get("/v1/workflows", headers=api.admin).json()["items"]
    (schedule,) = api.http.get("/v1/schedules", headers=api.admin).json()["items"]
    assert job_item["spec"]["deadline"] == {"within_seconds": 3600, "cancel": False}
    assert flow["deadline"] == {"within_seconds": 7200, "cancel": True}
    assert schedule["spec"]["deadline"] == {"within_seconds": 18000, "cancel": False}
    unchanged = ok(herder("apply", "-f", str(path)))
    assert "~ " not in unchanged
    path.write_text(DEADLINE_FILES.replace("within_seconds: 7200", "within_seconds: 60"))
    assert "~ workflow etl" in ok(herder("apply", "-f", str(path)))

    exported = tmp_path / "exported.yaml"
    ok(herder("export", "-o", str(exported)))
    assert exported.read_text().count("within_seconds") == 3
    again = ok(herder("apply", "--dry-run", "--prune", "-f", str(exported)))
    assert "+ " not in again
    assert "~ " not in again
    assert "- " not in again


def test_the_cli_sets_a_deadline_as_a_duration(herder: Herder) -> None:
    created = ok(herder("job", "create", "report", "--command", "true", "--deadline", "5h",
                        "--deadline-cancel", "--json"))  # fmt: skip
    assert json.loads(created)["spec"]["deadline"] == {"within_seconds": 18000, "cancel": True}
    schedule = ok(herder("schedule", "create", "report", "0 2 * * *", "--timezone",
                         "Europe/Paris", "--deadline", "90m", "--json"))  # fmt: skip
    assert json.loads(schedule)["spec"]["deadline"] == {"within_seconds": 5400, "cancel": False}
    shown = ok(herder("schedule", "show", json.loads(schedule)["id"]))
    assert "deadline: 90min after each fire, local time" in shown
    wrong = herder("job", "create", "other", "--command", "true", "--deadline", "5 hours")
    assert wrong.exit_code == 2
    assert "--deadline" in wrong.output
