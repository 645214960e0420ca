"""Every /v1 call needs a key; tenants see only their own objects; tokens stay in their lane."""

from __future__ import annotations

from sqlalchemy import select

from herder.domain.models import Role
from herder.store.schema import api_keys, worker_tokens
from tests.integration.conftest import Api


def test_a_call_without_a_key_is_refused_with_a_problem(api: Api) -> None:
    response = api.http.get("/v1/jobs")
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert "Authorization: Bearer" in response.json()["detail"]


def test_an_unknown_or_malformed_key_is_refused(api: Api) -> None:
    for key in ["nonsense", "key_123.wrong", api.admin_key + "x"]:
        assert api.http.get("/v1/jobs", headers=api.as_key(key)).status_code == 401


def test_keys_and_worker_tokens_are_stored_only_as_hashes(api: Api) -> None:
    with api.store.database.read() as connection:
        hashes = list(connection.execute(select(api_keys.c.secret_hash)).scalars().all())
        hashes += connection.execute(select(worker_tokens.c.secret_hash)).scalars().all()
    secrets = [api.admin_key.rpartition(".")[2], api.worker_token.partition(".")[2]]
    assert all(secret not in stored for secret in secrets for stored in hashes)


def test_a_worker_token_admits_only_the_worker_protocol(api: Api) -> None:
    response = api.http.get("/v1/jobs", headers=api.worker)
    assert response.status_code == 403
    assert "worker protocol" in response.json()["detail"]


def test_an_api_key_cannot_speak_the_worker_protocol(api: Api) -> None:
    response = api.http.post(
        "/v1/workers",
        headers=api.admin,
        json={"name": "sneaky", "capacity": {"cpu": 1, "memory_mb": 10, "gpus": 0}},
    )
    assert response.status_code == 403


def test_another_tenants_objects_answer_404(api: Api) -> None:
    job = api.create_job()
    run = api.start_run(job["id"])
    other = api.as_key(api.other_tenant_key())
    assert api.http.get(f"/v1/jobs/{job['id']}", headers=other).status_code == 404
    assert api.http.get(f"/v1/runs/{run['id']}", headers=other).status_code == 404
    assert api.http.post(f"/v1/jobs/{job['id']}/runs", headers=other).status_code == 404
    assert api.http.post(f"/v1/runs/{run['id']}/cancel", headers=other).status_code == 404
    assert api.http.get(f"/v1/runs/{run['id']}/logs", headers=other).status_code == 404
    assert api.http.get("/v1/jobs", headers=other).json()["items"] == []
    assert api.http.get("/v1/runs", headers=other).json()["items"] == []


def test_a_viewer_may_read_but_not_write(api: Api) -> None:
    viewer = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.VIEWER, "ro")[1])
    assert api.http.get("/v1/jobs", headers=viewer).status_code == 200
    response = api.http.post(
        "/v1/jobs", headers=viewer, json={"name": "x", "runtime": "shell", "command": "true"}
    )
    assert response.status_code == 403


def test_system_admin_creates_tenants_and_their_keys(api: Api) -> None:
    tenant = api.http.post("/v1/tenants", headers=api.admin, json={"name": "team-a"}).json()
    created = api.http.post(
        f"/v1/tenants/{tenant['id']}/keys", headers=api.admin, json={"role": "developer"}
    )
    assert created.status_code == 201
    team_key = api.as_key(created.json()["token"])
    assert api.http.get("/v1/jobs", headers=team_key).status_code == 200
    # A tenant's own key is not a system admin: it cannot create tenants.
    assert api.http.post("/v1/tenants", headers=team_key, json={"name": "b"}).status_code == 403
    duplicate = api.http.post("/v1/tenants", headers=api.admin, json={"name": "team-a"})
    assert duplicate.status_code == 409
