"""A schedule's optional name: unique per tenant (a unique index), found by ``?name=``."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Api, Herder


def create(api: Api, key: str | None = None, **body: object) -> dict[str, object]:
    headers = api.as_key(key) if key else api.admin
    job = api.http.post(
        "/v1/jobs", headers=headers, json={"name": "j", "runtime": "shell", "command": "true"}
    )
    if job.status_code == 409:
        job = api.http.get("/v1/jobs", headers=headers, params={"name": "j"})
        job_id = job.json()["items"][0]["id"]
    else:
        job_id = job.json()["id"]
    response = api.http.post(
        "/v1/schedules", headers=headers, json={"job_id": job_id, "cron": "0 * * * *", **body}
    )
    assert response.status_code == 201, response.text
    schedule: dict[str, object] = response.json()
    return schedule


def test_a_named_schedule_is_found_by_its_name(api: Api) -> None:
    named = create(api, name="nightly")
    create(api)  # unnamed schedules stay possible
    assert named["name"] == "nightly"
    found = api.http.get("/v1/schedules", headers=api.admin, params={"name": "nightly"}).json()
    assert [item["id"] for item in found["items"]] == [named["id"]]
    assert len(api.http.get("/v1/schedules", headers=api.admin).json()["items"]) == 2


def test_a_duplicate_name_is_409_naming_it_and_another_tenant_may_use_it(api: Api) -> None:
    create(api, name="nightly")
    job_id = api.http.get("/v1/jobs", headers=api.admin).json()["items"][0]["id"]
    again = api.http.post(
        "/v1/schedules",
        headers=api.admin,
        json={"job_id": job_id, "cron": "0 * * * *", "name": "nightly"},
    )
    assert again.status_code == 409
    assert "nightly" in again.json()["detail"]
    other = api.other_tenant_key()
    assert create(api, key=other, name="nightly")["name"] == "nightly"
    mine = api.http.get("/v1/schedules", headers=api.as_key(other), params={"name": "nightly"})
    assert len(mine.json()["items"]) == 1


@pytest.mark.parametrize("name", ["", "-starts-badly", "has space", "x" * 129, "a/b", "ü"])
def test_a_bad_name_is_422_naming_the_field(api: Api, name: str) -> None:
    job = api.create_job("j")
    response = api.http.post(
        "/v1/schedules",
        headers=api.admin,
        json={"job_id": job["id"], "cron": "0 * * * *", "name": name},
    )
    assert response.status_code == 422, response.text
    assert "name" in response.text


def test_a_huge_name_filter_is_422(api: Api) -> None:
    response = api.http.get("/v1/schedules", headers=api.admin, params={"name": "x" * 10_000})
    assert response.status_code == 422


def test_the_cli_creates_a_named_schedule(api: Api, herder: Herder) -> None:
    api.create_job("prepare")
    result = herder("schedule", "create", "prepare", "0 3 * * *", "--name", "nightly-prepare")
    assert result.exit_code == 0, result.output
    assert "nightly-prepare" in herder("schedule", "list").output
