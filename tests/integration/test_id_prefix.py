"""``id_prefix`` on the listings beside /v1/runs (every kind whose id the CLI takes), on both
stores: an item found from the start of its id (as the CLI does), only the caller's tenant's,
and LIKE's wildcards only as text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.conftest import Api
from tests.integration.test_alerts_api import channel, rule_body
from tests.integration.test_workflows import job, start, workflow

Made = Callable[[Api], list[str]]


def two_schedules(api: Api) -> list[str]:
    job_id = api.create_job("nightly")["id"]
    made = []
    for _ in range(2):
        body = {"job_id": job_id, "cron": "@daily"}
        response = api.http.post("/v1/schedules", headers=api.admin, json=body)
        assert response.status_code == 201, response.text
        made.append(response.json()["id"])
    return made


def two_workflow_runs(api: Api) -> list[str]:
    job(api, "work")
    workflow_id = workflow(api, "flow", tasks=[{"name": "only", "job": "work"}])["id"]
    return [start(api, workflow_id)["id"] for _ in range(2)]


def two_alert_channels(api: Api) -> list[str]:
    return [str(channel(api, name)["id"]) for name in ("ops", "oncall")]


def two_alert_rules(api: Api) -> list[str]:
    channel_id = channel(api)["id"]
    made = []
    for name in ("failures", "misses"):
        body = rule_body(channel_id, name=name)
        response = api.http.post("/v1/alert-rules", headers=api.admin, json=body)
        assert response.status_code == 201, response.text
        made.append(response.json()["id"])
    return made


def two_jobs(api: Api) -> list[str]:
    return [str(api.create_job(name)["id"]) for name in ("one", "two")]


def two_workflows(api: Api) -> list[str]:
    job(api, "work")
    return [
        str(workflow(api, name, tasks=[{"name": "only", "job": "work"}])["id"]) for name in "ab"
    ]


def made(api: Api, path: str, body: dict[str, Any]) -> str:
    response = api.http.post(path, headers=api.admin, json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def two_limits(api: Api) -> list[str]:
    return [made(api, "/v1/limits", {"name": name, "max_running": 1}) for name in ("a", "b")]


def two_triggers(api: Api) -> list[str]:
    api.create_job("work")
    return [
        made(api, "/v1/triggers", {"name": name, "event": "push", "job": "work"})
        for name in ("a", "b")
    ]


def two_hooks(api: Api) -> list[str]:
    return [made(api, "/v1/hooks", {"name": name}) for name in ("github", "stripe")]


def two_events(api: Api) -> list[str]:
    sent = [api.http.post("/v1/events", headers=api.admin, json={"name": "push"}) for _ in "ab"]
    return [str(one.json()["event"]["id"]) for one in sent]


def two_keys(api: Api) -> list[str]:
    return [made(api, "/v1/keys", {"role": "viewer", "name": name}) for name in ("a", "b")]


def two_pools(api: Api) -> list[str]:
    return [made(api, "/v1/pools", {"name": name}) for name in ("gpu", "cpu")]


def two_tenants(api: Api) -> list[str]:
    return [made(api, "/v1/tenants", {"name": name}) for name in ("team-a", "team-c")]


LISTINGS = [
    pytest.param("/v1/limits", two_limits, id="limits"),
    pytest.param("/v1/triggers", two_triggers, id="triggers"),
    pytest.param("/v1/hooks", two_hooks, id="hooks"),
    pytest.param("/v1/events", two_events, id="events"),
    pytest.param("/v1/keys", two_keys, id="keys"),
    pytest.param("/v1/pools", two_pools, id="pools"),
    pytest.param("/v1/tenants", two_tenants, id="tenants"),
    pytest.param("/v1/workflows", two_workflows, id="workflows"),
    pytest.param("/v1/jobs", two_jobs, id="jobs"),
    pytest.param("/v1/schedules", two_schedules, id="schedules"),
    pytest.param("/v1/workflow-runs", two_workflow_runs, id="workflow-runs"),
    pytest.param("/v1/alert-channels", two_alert_channels, id="alert-channels"),
    pytest.param("/v1/alert-rules", two_alert_rules, id="alert-rules"),
]


def listed(api: Api, path: str, prefix: str, headers: dict[str, str] | None = None) -> Any:
    return api.http.get(path, headers=headers or api.admin, params={"id_prefix": prefix})


@pytest.mark.parametrize(("path", "make"), LISTINGS)
def test_an_item_is_listed_by_the_start_of_its_id(api: Api, path: str, make: Made) -> None:
    first, second = make(api)
    kind = first.partition("_")[0]
    found = listed(api, path, first[: len(kind) + 9])
    assert found.status_code == 200, found.text
    assert {item["id"] for item in found.json()["items"]} >= {first}
    assert [item["id"] for item in listed(api, path, first).json()["items"]] == [first]
    assert [item["id"] for item in listed(api, path, second).json()["items"]] == [second]
    assert listed(api, path, f"{kind}_ZZZZZZZZ").json()["items"] == []
    other = listed(api, path, first, headers=api.as_key(api.other_tenant_key("team-b")))
    if path == "/v1/tenants":  # the tenants are for system admins alone
        assert other.status_code == 403
    else:
        assert other.json()["items"] == []


@pytest.mark.parametrize(
    "path",
    [
        "/v1/jobs",
        "/v1/schedules",
        "/v1/workflows",
        "/v1/workflow-runs",
        "/v1/alert-channels",
        "/v1/alert-rules",
        "/v1/limits",
        "/v1/triggers",
        "/v1/hooks",
        "/v1/events",
        "/v1/keys",
        "/v1/pools",
        "/v1/tenants",
    ],
)
@pytest.mark.parametrize("prefix", ["sch_%", "wfrun__", "x_", "sch_01m8", "sch_" + "0" * 27])
def test_a_malformed_start_is_a_problem_naming_the_field(api: Api, path: str, prefix: str) -> None:
    response = listed(api, path, prefix)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert [error["field"] for error in response.json()["errors"]] == ["id_prefix"]


@pytest.mark.parametrize(
    ("path", "make", "name"),
    [
        pytest.param("/v1/alert-channels", two_alert_channels, "oncall", id="alert-channels"),
        pytest.param("/v1/alert-rules", two_alert_rules, "failures", id="alert-rules"),
    ],
)
def test_a_channel_or_rule_is_listed_by_its_name(
    api: Api, path: str, make: Made, name: str
) -> None:
    make(api)
    found = api.http.get(path, headers=api.admin, params={"name": name}).json()["items"]
    assert [item["name"] for item in found] == [name]
    assert api.http.get(path, headers=api.admin, params={"name": "nobody"}).json()["items"] == []
    other = api.as_key(api.other_tenant_key("team-b"))
    assert api.http.get(path, headers=other, params={"name": name}).json()["items"] == []
    too_long = api.http.get(path, headers=api.admin, params={"name": "x" * 129})
    assert too_long.status_code == 422
    assert [error["field"] for error in too_long.json()["errors"]] == ["name"]
