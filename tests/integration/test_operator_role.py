"""An operator runs and stops what developers defined, and changes no definition; the access
matrix pins every route, this shows the role at work."""

from __future__ import annotations

from herder.domain.models import Role
from tests.integration.conftest import Api


def test_an_operator_starts_cancels_and_reruns_runs_and_pauses_schedules(api: Api) -> None:
    operator = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.OPERATOR, "ops")[1])
    job = api.create_job()
    schedule = api.http.post(
        "/v1/schedules", headers=api.admin, json={"job_id": job["id"], "cron": "@daily"}
    ).json()
    run = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=operator, json={})
    assert run.status_code == 201
    assert api.http.post(f"/v1/runs/{run.json()['id']}/cancel", headers=operator).status_code == 200
    assert api.http.post(f"/v1/runs/{run.json()['id']}/rerun", headers=operator).status_code == 201
    for action in ("pause", "resume"):
        response = api.http.post(f"/v1/schedules/{schedule['id']}/{action}", headers=operator)
        assert response.status_code == 200, response.text


def test_an_operator_changes_no_definition_and_is_told_why(api: Api) -> None:
    operator = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.OPERATOR, "ops")[1])
    job = api.create_job()
    for method, path, body in [
        ("POST", "/v1/jobs", {"name": "x", "runtime": "shell", "command": "true"}),
        ("PATCH", f"/v1/jobs/{job['id']}", {"command": "rm -rf /"}),
        ("DELETE", f"/v1/jobs/{job['id']}", None),
        ("POST", "/v1/schedules", {"job_id": job["id"], "cron": "* * * * *"}),
    ]:
        response = api.http.request(method, path, headers=operator, json=body)
        assert response.status_code == 403, (method, path)
        assert response.json()["detail"] == (
            "role operator may start and stop runs but not change definitions"
        )
    assert api.http.post("/v1/keys", headers=operator, json={"role": "admin"}).status_code == 403
    assert api.http.get(f"/v1/jobs/{job['id']}", headers=operator).json()["spec"]["command"] == (
        "echo hello"
    )


def test_a_viewer_may_not_start_a_run(api: Api) -> None:
    viewer = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.VIEWER, "ro")[1])
    job = api.create_job()
    response = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=viewer, json={})
    assert response.status_code == 403
    assert response.json()["detail"] == "role viewer may read but not start or stop anything"
