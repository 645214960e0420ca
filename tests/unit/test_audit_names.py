"""How a call is named in the audit log, from its route's template alone."""

from __future__ import annotations

import pytest

from herder.domain.audit import action, field_names, is_audited, target


@pytest.mark.parametrize(
    ("method", "route", "expected"),
    [
        ("POST", "/v1/jobs", "jobs.create"),
        ("PATCH", "/v1/jobs/{job_id}", "jobs.update"),
        ("DELETE", "/v1/jobs/{job_id}", "jobs.delete"),
        ("PUT", "/v1/workflows/{workflow_id}", "workflows.put"),
        ("POST", "/v1/runs/{run_id}/cancel", "runs.cancel"),
        ("POST", "/v1/keys/{key_id}/revoke", "keys.revoke"),
        ("POST", "/v1/tenants/{tenant_id}/keys", "tenants.keys"),
        ("POST", "/v1/schedules/{schedule_id}/backfills", "schedules.backfills"),
        ("POST", "/v1/alert-channels/{channel_id}/test", "alert-channels.test"),
        ("PUT", "/v1/secrets/{name}", "secrets.put"),
        ("DELETE", "/v1/secrets/{name}", "secrets.delete"),
    ],
)
def test_the_action_is_named_after_the_route(method: str, route: str, expected: str) -> None:
    assert action(method, route) == expected


def test_the_object_is_the_routes_first_resource_and_its_id() -> None:
    assert target("/v1/runs/{run_id}/cancel", {"run_id": "run_1"}) == ("runs", "run_1")
    assert target("/v1/jobs", {}) == ("jobs", None)
    assert target("/v1/secrets/{name}", {"name": "DB_PASSWORD"}) == ("secrets", "DB_PASSWORD")


def test_reads_run_submissions_and_previews_are_not_audited() -> None:
    assert is_audited("PATCH", "/v1/jobs/{job_id}")
    assert is_audited("PUT", "/v1/secrets/{name}")  # a route added later is covered
    assert not is_audited("GET", "/v1/jobs")
    assert not is_audited("POST", "/v1/jobs/{job_id}/runs")
    assert not is_audited("POST", "/v1/runs/batch")
    assert not is_audited("POST", "/v1/cron/preview")
    assert not is_audited("POST", "/v1/workflows/check")
    assert not is_audited("POST", "/healthz")


@pytest.mark.parametrize(
    ("body", "names"),
    [
        ({"name": "db", "value": "hunter2"}, ["name", "value"]),
        ({"env": {"PW": "x"}, "command": "true"}, ["command", "env"]),
        ({"hunter2 is my password": 1, "Secret-Token": 2, "ok": 3}, ["ok"]),
        ([{"name": "x"}], []),
        ("text", []),
        (None, []),
        ({f"f{index}": index for index in range(100)}, sorted(f"f{i}" for i in range(100))[:64]),
    ],
)
def test_only_field_names_shaped_like_the_apis_are_kept(body: object, names: list[str]) -> None:
    assert field_names(body) == names
