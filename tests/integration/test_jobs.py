"""Jobs over REST: create, read, list with cursors and filters, update, delete."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Api


def test_a_job_is_created_with_defaults_and_read_back(api: Api) -> None:
    job = api.create_job("nightly", env={"MODE": "full"}, labels={"team": "data"})
    fetched = api.http.get(f"/v1/jobs/{job['id']}", headers=api.admin).json()
    assert fetched == job
    spec = fetched["spec"]
    assert spec["timeout_seconds"] == 3600
    assert spec["priority"] == "medium"
    assert spec["resources"] == {"cpu": 1.0, "memory_mb": 256, "gpus": 0, "disk_mb": 1024}
    assert spec["retry"]["max_attempts"] == 1
    assert spec["stop_grace_seconds"] == 30
    assert spec["env"] == {"MODE": "full"}


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"timeout_seconds": 86401}, "timeout_seconds", "24 h"),
        ({"stop_grace_seconds": -1}, "stop_grace_seconds", "greater than or equal to 0"),
        ({"stop_grace_seconds": 601}, "stop_grace_seconds", "less than or equal to 600"),
        ({"stop_grace_seconds": "x"}, "stop_grace_seconds", "valid integer"),
        ({"runtime": "shell", "command": None}, "body", "needs a command"),
        ({"runtime": "python", "command": None}, "body", "needs an artifact"),
        ({"runtime": "cobol"}, "runtime", "shell"),
        ({"resources": {"cpu": 0}}, "resources.cpu", "greater than 0"),
        ({"priority": "urgent"}, "priority", "high"),
        ({"env": {"HERDER_RUN_ID": "x"}}, "env", "reserved"),
        ({"env": {"1BAD": "x"}}, "env", "not a valid"),
        ({"name": "has space"}, "name", "letters, digits"),
        ({"artifact": "abc"}, "artifact", "sha256"),
        ({"surprise": 1}, "surprise", "Extra inputs"),
    ],
)
def test_invalid_jobs_get_422_naming_the_field(
    api: Api, body: dict[str, object], field: str, words: str
) -> None:
    full = {"name": "bad", "runtime": "shell", "command": "true", **body}
    response = api.http.post("/v1/jobs", headers=api.admin, json=full)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert any(error["field"] == field for error in problem["errors"]), problem
    assert words in problem["detail"]


def test_a_stop_grace_is_kept_changed_and_taken_by_its_runs(api: Api) -> None:
    job = api.create_job("graceful", stop_grace_seconds=5)
    assert job["spec"]["stop_grace_seconds"] == 5
    changed = api.http.patch(
        f"/v1/jobs/{job['id']}", headers=api.admin, json={"stop_grace_seconds": 0}
    )
    assert changed.status_code == 200, changed.text
    fetched = api.http.get(f"/v1/jobs/{job['id']}", headers=api.admin).json()
    assert fetched["spec"]["stop_grace_seconds"] == 0
    run = api.start_run(job["id"])
    assert run["spec"]["stop_grace_seconds"] == 0


def test_an_artifact_the_tenant_does_not_have_is_refused(api: Api) -> None:
    body = {"name": "p", "runtime": "python", "artifact": "a" * 64}
    response = api.http.post("/v1/jobs", headers=api.admin, json=body)
    assert response.status_code == 422
    assert "upload it" in response.json()["detail"]


def test_names_are_unique_per_tenant(api: Api) -> None:
    api.create_job("same")
    again = api.http.post(
        "/v1/jobs", headers=api.admin, json={"name": "same", "runtime": "shell", "command": "x"}
    )
    assert again.status_code == 409
    other = api.as_key(api.other_tenant_key())
    elsewhere = api.http.post(
        "/v1/jobs", headers=other, json={"name": "same", "runtime": "shell", "command": "x"}
    )
    assert elsewhere.status_code == 201


def test_listing_pages_with_a_cursor_newest_first(api: Api) -> None:
    created = [api.create_job(f"job-{index}")["id"] for index in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.http.get("/v1/jobs", headers=api.admin, params=params).json()
        seen += [job["id"] for job in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(created))


def test_listing_filters_by_name_and_labels(api: Api) -> None:
    api.create_job("a", labels={"team": "data", "tier": "1"})
    api.create_job("b", labels={"team": "data", "tier": "2"})
    api.create_job("c", labels={"team": "web"})

    def names(**params: object) -> list[str]:
        page = api.http.get("/v1/jobs", headers=api.admin, params=params).json()
        return sorted(job["name"] for job in page["items"])

    assert names(label="team=data") == ["a", "b"]
    assert names(label=["team=data", "tier=2"]) == ["b"]
    assert names(name="c") == ["c"]
    bad = api.http.get("/v1/jobs", headers=api.admin, params={"label": "nokey"})
    assert bad.status_code == 422


def test_update_changes_only_the_given_fields(api: Api) -> None:
    job = api.create_job("j", env={"A": "1"})
    response = api.http.patch(
        f"/v1/jobs/{job['id']}", headers=api.admin, json={"timeout_seconds": 60, "name": "k"}
    )
    assert response.status_code == 200, response.text
    updated = response.json()
    assert updated["name"] == "k"
    assert updated["spec"]["timeout_seconds"] == 60
    assert updated["spec"]["env"] == {"A": "1"}
    too_long = api.http.patch(
        f"/v1/jobs/{job['id']}", headers=api.admin, json={"timeout_seconds": 10**6}
    )
    assert too_long.status_code == 422
    unknown = api.http.patch(f"/v1/jobs/{job['id']}", headers=api.admin, json={"colour": 1})
    assert unknown.status_code == 422


def test_delete_is_refused_while_runs_are_active_and_keeps_history(api: Api) -> None:
    job = api.create_job("d")
    run = api.start_run(job["id"])
    refused = api.http.delete(f"/v1/jobs/{job['id']}", headers=api.admin)
    assert refused.status_code == 409
    assert "cancel" in refused.json()["detail"]
    api.http.post(f"/v1/runs/{run['id']}/cancel", headers=api.admin)
    assert api.http.delete(f"/v1/jobs/{job['id']}", headers=api.admin).status_code == 204
    assert api.http.get(f"/v1/jobs/{job['id']}", headers=api.admin).status_code == 404
    assert api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()["state"] == "cancelled"
