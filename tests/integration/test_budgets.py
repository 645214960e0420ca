"""Time budgets through the API and the store: set by the system admins, charged from what
attempts report, holding a tenant's runs once spent, and usage each tenant sees of its own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from herder.control.alerts import AlertEvaluator
from herder.domain.models import Role
from tests.integration.conftest import Api, Herder
from tests.integration.dispatching import dispatch
from tests.integration.registered import as_worker, register_worker
from tests.integration.test_run_outputs import run_detail
from tests.integration.test_worker_protocol import claim, completion, report


def set_budgets(api: Api, tenant_id: str, body: dict[str, Any]) -> Any:
    return api.http.put(f"/v1/tenants/{tenant_id}/budgets", headers=api.admin, json=body)


def used_cpu(api: Api, worker_id: str, cpu_seconds: float) -> dict[str, Any]:
    """A run of a new job that ran on the worker and reported ``cpu_seconds`` of CPU."""
    job = api.create_job(f"job-{cpu_seconds}", resources={"cpu": 1, "memory_mb": 64})
    run = api.start_run(job["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    usage = {"cpu_user_seconds": cpu_seconds - 1, "cpu_system_seconds": 1, "max_rss_kb": 10}
    (result,) = report(api, worker_id, completions=[{**completion(assignment), "usage": usage}])
    assert result["status"] == 200
    return run


def usage(api: Api, headers: dict[str, str], **query: str) -> Any:
    response = api.http.get("/v1/usage", headers=headers, params=query)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_system_admins_set_a_tenants_budgets_and_its_admins_read_them(api: Api) -> None:
    tenant = api.store.access.create_tenant("ml")
    body = {"time_zone": "Europe/Paris", "budgets": [
        {"period": "week", "gpu_seconds": 36000, "pool": "a100", "hard": True},
        {"period": "day", "cpu_seconds": 3600},
    ]}  # fmt: skip
    assert set_budgets(api, tenant.id, body).status_code == 200
    own_admin = api.as_key(api.store.access.create_api_key(tenant.id, Role.ADMIN, "k")[1])
    read = api.http.get(f"/v1/tenants/{tenant.id}/budgets", headers=own_admin)
    assert read.status_code == 200
    assert read.json()["time_zone"] == "Europe/Paris"
    assert [budget["period"] for budget in read.json()["budgets"]] == ["week", "day"]
    assert set_budgets(api, "ten_missing", body).status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"budgets": [{"period": "day", "cpu_seconds": -5}]}, "budgets.0.cpu_seconds"),
        ({"budgets": [{"period": "day", "gpu_seconds": 1e300}]}, "budgets.0.gpu_seconds"),
        ({"budgets": [{"period": "day", "cpu_seconds": "all"}]}, "budgets.0.cpu_seconds"),
        ({"budgets": [{"period": "fortnight", "cpu_seconds": 1}]}, "budgets.0.period"),
        ({"budgets": [{"period": "day", "cpu_seconds": 1, "pool": "../x"}]}, "budgets.0.pool"),
        ({"time_zone": "Nowhere/Land"}, "time_zone"),
        ({"budgets": [{"period": "day", "cpu_seconds": 1}] * 33}, "budgets"),
    ],
)
def test_a_hostile_budget_is_a_422_naming_its_field(
    api: Api, body: dict[str, Any], field: str
) -> None:
    response = set_budgets(api, api.tenant_id, body)
    assert response.status_code == 422, response.text
    assert [error["field"] for error in response.json()["errors"]] == [field]


def test_ended_attempts_are_charged_and_each_tenant_sees_only_its_own_usage(api: Api) -> None:
    worker_id = register_worker(api, cpu=4)
    first = used_cpu(api, worker_id, 30)
    used_cpu(api, worker_id, 12)
    by_job = usage(api, api.admin, group_by="job", tenant_id=api.tenant_id)
    assert sorted(row["cpu_seconds"] for row in by_job["rows"]) == [12, 30]
    assert first["job_id"] in {row["job_id"] for row in by_job["rows"]}
    by_tenant = usage(api, api.admin, period="month")
    assert [(row["tenant_id"], row["cpu_seconds"]) for row in by_tenant["rows"]] == [
        (api.tenant_id, 42)
    ]
    other = api.as_key(api.other_tenant_key("other", role=Role.VIEWER))
    assert usage(api, other)["rows"] == []
    intruding = api.http.get("/v1/usage", headers=other, params={"tenant_id": api.tenant_id})
    assert intruding.status_code == 404
    assert "cpu_seconds" not in intruding.text


def test_a_spent_budget_holds_new_runs_saying_which_and_when_it_resets(api: Api) -> None:
    assert set_budgets(api, api.tenant_id, {
        "time_zone": "America/New_York", "budgets": [{"period": "day", "cpu_seconds": 40}],
    }).status_code == 200  # fmt: skip
    worker_id = register_worker(api, cpu=4)
    used_cpu(api, worker_id, 41)
    held = api.start_run(api.create_job("after")["id"])
    assert claim(api, worker_id)["assignments"] == []
    reason = run_detail(api, held["id"])["waiting_reason"]
    assert reason.startswith("tenant day budget is spent (cpu 41 of 40 s); it resets at ")
    assert reason.endswith(("EST", "EDT"))
    (standing,) = usage(api, api.admin)["budgets"]
    assert standing["spent"]
    assert standing["fraction"] > 1
    assert set_budgets(api, api.tenant_id, {"budgets": []}).status_code == 200
    assert len(claim(api, worker_id)["assignments"]) == 1


def test_a_spent_hard_budget_stops_running_runs_which_wait_again(api: Api) -> None:
    hard = {"budgets": [{"period": "month", "cpu_seconds": 40, "hard": True}]}
    assert set_budgets(api, api.tenant_id, hard).status_code == 200
    worker_id = register_worker(api, cpu=4)
    running = api.start_run(api.create_job("long")["id"])
    assert len(claim(api, worker_id)["assignments"]) == 1
    used_cpu(api, worker_id, 50)
    dispatch(api.store)
    (attempt,) = run_detail(api, running["id"])["attempts"]
    stopped = [event["message"] for event in run_detail(api, running["id"])["events"]]
    # The running attempt counts too (its CPU asked for, times the time run so far): on a
    # loaded box a second more.
    spent = re.compile(
        f"stopping attempt 1 on {worker_id}: stopped by the tenant's hard month budget: "
        r"cpu (\d+) of 40 s used"
    )
    used = [int(found[1]) for found in map(spent.match, stopped) if found]
    assert used, stopped
    assert used[0] >= 50, stopped
    heartbeat = api.http.post(
        f"/v1/workers/{worker_id}/heartbeat", headers=as_worker(worker_id),
        json={"running": [{"attempt_id": attempt["id"], "attempt": 1}]},
    )  # fmt: skip
    assert heartbeat.status_code == 200, heartbeat.text
    assert heartbeat.json()["preempt"] == [attempt["id"]]  # stopped with its grace


def test_a_budget_rule_opens_an_incident_at_80_percent_and_another_when_spent(api: Api) -> None:
    body = {"budgets": [{"period": "week", "cpu_seconds": 100}]}
    assert set_budgets(api, api.tenant_id, body).status_code == 200
    channel = api.http.post(
        "/v1/alert-channels", headers=api.admin,
        json={"name": "hook", "url": "https://hooks.example.com/herder"},
    )  # fmt: skip
    rule = api.http.post(
        "/v1/alert-rules", headers=api.admin,
        json={"name": "budget", "kind": "budget", "channel_ids": [channel.json()["id"]]},
    )  # fmt: skip
    assert rule.status_code == 201, rule.text
    worker_id = register_worker(api, cpu=4)
    used_cpu(api, worker_id, 85)
    AlertEvaluator(api.store).step()
    incidents = api.store.alert_history.incidents(api.tenant_id).items
    assert [incident.key for incident in incidents] == ["week:*:0.8"]
    assert incidents[0].summary == "week budget reached 0.8 (85% used)"
    bad = api.http.post(
        "/v1/alert-rules", headers=api.admin,
        json={"name": "b2", "kind": "budget", "params": {"fraction": 1.5},
              "channel_ids": [channel.json()["id"]]},
    )  # fmt: skip
    assert bad.status_code == 422
    assert [error["field"] for error in bad.json()["errors"]] == ["params.fraction"]


def test_metrics_show_each_budgets_use_against_its_limit(api: Api) -> None:
    body = {"budgets": [{"period": "day", "cpu_seconds": 100, "gpu_seconds": 10}]}
    assert set_budgets(api, api.tenant_id, body).status_code == 200
    used_cpu(api, register_worker(api, cpu=4), 25)
    scraped = api.http.get("/metrics", headers=api.admin).text
    name = api.store.access.get_tenant(api.tenant_id).name
    labels = f'period="day",pool="",resource="cpu",tenant="{name}"'
    assert f"herder_budget_used_seconds{{{labels}}} 25.0" in scraped
    assert f"herder_budget_limit_seconds{{{labels}}} 100.0" in scraped
    assert 'resource="gpu"' in scraped


def test_every_member_of_a_gang_is_charged_and_a_fan_out_waits_whole(api: Api) -> None:
    assert set_budgets(api, api.tenant_id, {
        "budgets": [{"period": "day", "cpu_seconds": 15}],
    }).status_code == 200  # fmt: skip
    worker_id = register_worker(api, cpu=4)
    gang = api.create_job("gang", replicas=2, resources={"cpu": 1, "memory_mb": 64})
    api.start_run(gang["id"])
    members = claim(api, worker_id)["assignments"]
    usage_each = {"cpu_user_seconds": 8, "cpu_system_seconds": 0, "max_rss_kb": 10}
    ended = [{**completion(member), "usage": usage_each} for member in members]
    assert [result["status"] for result in report(api, worker_id, completions=ended)] == [200] * 2
    (row,) = usage(api, api.admin)["rows"]
    assert row["cpu_seconds"] == 16
    job_id = api.create_job("fan-out")["id"]
    batch = api.http.post(
        "/v1/runs/batch", headers=api.admin, json={"runs": [{"job_id": job_id}] * 5}
    )
    assert batch.status_code == 200, batch.text
    assert claim(api, worker_id)["assignments"] == []
    for item in batch.json()["items"]:
        assert "budget is spent" in run_detail(api, item["run_id"])["waiting_reason"]


def test_the_cli_sets_shows_and_reports_budgets(api: Api, herder: Herder, tmp_path: Path) -> None:
    document = tmp_path / "budgets.json"
    document.write_text(
        '{"time_zone": "Asia/Tokyo", "budgets": [{"period": "day", "cpu_seconds": 90}]}'
    )
    assert herder("budgets", "set", api.tenant_id, str(document)).exit_code == 0
    shown = herder("budgets", "show", "default")  # the tenant by its name
    assert "time zone Asia/Tokyo" in shown.output
    assert "day budget: cpu 90 s" in shown.output
    job_id = used_cpu(api, register_worker(api), 30)["job_id"]
    report = herder("usage", "--by", "job")
    assert report.exit_code == 0, report.output
    assert "30.0" in report.output
    assert "30 / 90" in report.output
    assert api.tenant_id not in report.output  # tenants and jobs by name
    assert job_id not in report.output
    assert "job-30" in report.output
    document.write_text('{"budgets": [{"period": "day", "cpu_seconds": -1}]}')
    refused = herder("budgets", "set", api.tenant_id, str(document))
    assert refused.exit_code == 1
    assert "cpu_seconds" in refused.output
