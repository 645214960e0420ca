"""Overrides (of a one-off run, of a schedule) obey the limits of a job spec, checked when
they arrive: an override a job would refuse never reaches the store."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Api

TOO_MANY_ARGS = ["x"] * 1025
TOO_LONG_ARG = "x" * 65537


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"args": TOO_MANY_ARGS}, "args"),
        ({"args": [TOO_LONG_ARG]}, "args.0"),
        ({"env": {"BIG": TOO_LONG_ARG}}, "env.BIG"),
        ({"env": {"1BAD": "x"}}, "env"),
        ({"env": {"HERDER_RUN_ID": "x"}}, "env"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
    ],
)
def test_a_run_override_a_job_would_refuse_is_422_and_stores_nothing(
    api: Api, overrides: dict[str, Any], field: str
) -> None:
    job = api.create_job()
    response = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=api.admin, json=overrides)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert field in [error["field"] for error in response.json()["errors"]]
    listing = api.http.get("/v1/runs", headers=api.admin)
    assert listing.status_code == 200, listing.text
    assert listing.json()["items"] == []


def test_the_largest_allowed_overrides_run_and_list(api: Api) -> None:
    job = api.create_job()
    run = api.start_run(job["id"], args=["x"] * 1024)
    listing = api.http.get("/v1/runs", headers=api.admin)
    assert listing.status_code == 200, listing.text
    assert [item["id"] for item in listing.json()["items"]] == [run["id"]]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"args": TOO_MANY_ARGS}, "overrides.args"),
        ({"env": {"BIG": TOO_LONG_ARG}}, "overrides.env.BIG"),
    ],
)
def test_a_schedule_override_a_job_would_refuse_is_422(
    api: Api, overrides: dict[str, Any], field: str
) -> None:
    job = api.create_job()
    body = {"job_id": job["id"], "cron": "* * * * *", "overrides": overrides}
    response = api.http.post("/v1/schedules", headers=api.admin, json=body)
    assert response.status_code == 422, response.text
    assert field in [error["field"] for error in response.json()["errors"]]
    schedule = api.http.post(
        "/v1/schedules", headers=api.admin, json={"job_id": job["id"], "cron": "* * * * *"}
    ).json()
    patch = api.http.patch(
        f"/v1/schedules/{schedule['id']}", headers=api.admin, json={"overrides": overrides}
    )
    assert patch.status_code == 422, patch.text
    assert api.http.get("/v1/schedules", headers=api.admin).status_code == 200
