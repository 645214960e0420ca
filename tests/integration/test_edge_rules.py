"""Small rules at the edge of the API: strict types in a PATCH, an empty cursor, a schedule
that could never fire, one rule for cron previews and schedules, and another tenant's keys."""

from __future__ import annotations

import pytest

from herder.domain.models import Role
from tests.integration.conftest import Api


@pytest.mark.parametrize("name", [12345, None, ["a"]])
def test_a_job_name_must_be_a_string(api: Api, name: object) -> None:
    job = api.create_job("keep")
    response = api.http.patch(f"/v1/jobs/{job['id']}", headers=api.admin, json={"name": name})
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "name"
    assert api.http.get(f"/v1/jobs/{job['id']}", headers=api.admin).json()["name"] == "keep"


@pytest.mark.parametrize(
    "path", ["/v1/jobs", "/v1/runs", "/v1/schedules", "/v1/queue", "/v1/tenants"]
)
def test_an_empty_cursor_is_the_first_page(api: Api, path: str) -> None:
    job = api.create_job()
    api.start_run(job["id"])
    schedule = {"job_id": job["id"], "cron": "@daily"}
    assert api.http.post("/v1/schedules", headers=api.admin, json=schedule).status_code == 201
    first = api.http.get(path, headers=api.admin)
    empty = api.http.get(f"{path}?cursor=", headers=api.admin)
    assert empty.status_code == 200, empty.text
    ids = [item.get("id", item.get("run_id")) for item in first.json()["items"]]
    assert ids
    assert [item.get("id", item.get("run_id")) for item in empty.json()["items"]] == ids


def _schedule(api: Api, **fields: object) -> dict[str, object]:
    job = api.create_job()
    response = api.http.post(
        "/v1/schedules", headers=api.admin, json={"job_id": job["id"], **fields}
    )
    problem: dict[str, object] = response.json()
    assert response.status_code == 422, response.text
    return problem


def test_a_schedule_that_ended_already_is_refused_naming_end_at(api: Api) -> None:
    problem = _schedule(api, cron="* * * * *", end_at="2020-01-01T00:00:00Z")
    assert problem["field"] == "end_at"
    assert "passed" in str(problem["detail"])


def test_a_window_with_no_fire_in_it_is_refused_naming_end_at(api: Api) -> None:
    problem = _schedule(  # fires on 1 January only
        api, cron="0 0 1 1 *", start_at="2030-01-02T00:00:00Z", end_at="2030-06-01T00:00:00Z"
    )
    assert problem["field"] == "end_at"


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_a_cron_that_never_fires_is_refused_alike_by_preview_and_schedule(
    api: Api, cron: str
) -> None:
    schedule = _schedule(api, cron=cron)
    preview = api.http.post("/v1/cron/preview", headers=api.admin, json={"cron": cron})
    assert preview.status_code == 422, preview.text
    assert preview.json()["field"] == schedule["field"] == "cron"
    assert preview.json()["detail"] == schedule["detail"]
    assert "never fires" in str(schedule["detail"])


def test_a_rare_cron_is_previewed_and_scheduled(api: Api) -> None:
    preview = api.http.post("/v1/cron/preview", headers=api.admin, json={"cron": "0 0 29 2 *"})
    assert preview.status_code == 200, preview.text
    assert preview.json()["fires"]
    job = api.create_job()
    created = api.http.post(
        "/v1/schedules", headers=api.admin, json={"job_id": job["id"], "cron": "0 0 29 2 *"}
    )
    assert created.status_code == 201, created.text


@pytest.mark.parametrize("role", list(Role))
def test_another_tenants_keys_answer_404(api: Api, role: Role) -> None:
    other = api.store.access.create_tenant("other")
    team = api.store.access.create_tenant("team")
    key = api.as_key(api.store.access.create_api_key(team.id, role, "k")[1])
    response = api.http.post(f"/v1/tenants/{other.id}/keys", headers=key, json={})
    assert response.status_code == 404, response.text
    own = api.http.post(f"/v1/tenants/{team.id}/keys", headers=key, json={})
    assert own.status_code == (201 if role is Role.ADMIN else 403), own.text


def test_an_upload_takes_only_its_file_part(api: Api) -> None:
    response = api.http.post(
        "/v1/artifacts",
        headers=api.admin,
        files={"file": ("a.py", b"print(1)", "text/x-python")},
        data={"comment": "x"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "comment"
