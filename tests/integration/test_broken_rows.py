"""A stored row its model refuses (written by an older version, or by hand) is a server bug:
reading it alone answers a logged 500 problem, never a 422; listings leave it out (logged)
and still show every good row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Table, update

from herder.store.schema import jobs, runs, schedules
from tests.integration.conftest import Api


@pytest.fixture
def lenient(api: Api) -> Iterator[TestClient]:
    """A client that shows server errors as the 500 responses clients get."""
    with TestClient(api.http.app, raise_server_exceptions=False) as http:
        yield http


def _break(api: Api, table: Table, row_id: object, spec: dict[str, Any]) -> None:
    with api.store.database.write() as connection:
        connection.execute(update(table).where(table.c.id == row_id).values(spec=spec))


def _ids(api: Api, path: str) -> list[str]:
    response = api.http.get(path, headers=api.admin)
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["items"]]


def _assert_server_error(lenient: TestClient, api: Api, path: str) -> None:
    response = lenient.get(path, headers=api.admin)
    assert response.status_code == 500, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 500


def test_a_broken_run_leaves_the_listing_and_other_runs_working(
    api: Api, lenient: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    job = api.create_job()
    good = [api.start_run(job["id"]) for _ in range(3)]
    bad = api.start_run(job["id"])
    _break(api, runs, bad["id"], {"runtime": "shell", "command": "x", "args": ["x"] * 1025})

    assert _ids(api, "/v1/runs") == [run["id"] for run in reversed(good)]
    assert f"stored row {bad['id']} fails its model" in caplog.text
    assert "Traceback" in caplog.text
    for run in good:
        assert api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).status_code == 200
    _assert_server_error(lenient, api, f"/v1/runs/{bad['id']}")
    assert api.http.get("/v1/queue", headers=api.admin).json()["items"]  # columns, no spec


def test_a_broken_job_and_schedule_leave_their_listings_working(
    api: Api, lenient: TestClient
) -> None:
    good_job, bad_job = api.create_job("good"), api.create_job("bad")
    _break(api, jobs, bad_job["id"], {"runtime": "cobol"})
    assert _ids(api, "/v1/jobs") == [good_job["id"]]
    _assert_server_error(lenient, api, f"/v1/jobs/{bad_job['id']}")

    made = [
        api.http.post(
            "/v1/schedules", headers=api.admin, json={"job_id": good_job["id"], "cron": "@daily"}
        ).json()
        for _ in range(2)
    ]
    _break(api, schedules, made[0]["id"], {"cron": ""})
    assert _ids(api, "/v1/schedules") == [made[1]["id"]]
    _assert_server_error(lenient, api, f"/v1/schedules/{made[0]['id']}")
    assert api.http.get(f"/v1/schedules/{made[1]['id']}", headers=api.admin).status_code == 200
