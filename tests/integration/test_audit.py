"""The audit log: every change made with an API key, on every route (a new one too), says
who, what and when and how it ended, never a value sent; a tenant's admins read their own,
nobody else's (docs/tenants.md)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from herder.domain.audit import UNAUDITED_ROUTES
from herder.domain.models import Role
from herder.store.schema import audit_log
from tests.integration.conftest import Api
from tests.integration.test_access_matrix import ROUTES, SECRET, Needs, _build_world, needs

KEY_ROUTES = {Needs.VIEWER, Needs.OPERATOR, Needs.DEVELOPER, Needs.TENANT_ADMIN}


def entries(api: Api, headers: dict[str, str] | None = None, **params: Any) -> list[Any]:
    response = api.http.get("/v1/audit", headers=headers or api.admin, params=params)
    assert response.status_code == 200, response.text
    items: list[Any] = response.json()["items"]
    return items


def stored_rows_text(api: Api) -> str:
    with api.store.database.read() as connection:
        return repr(connection.execute(select(audit_log)).all())


def test_every_change_on_every_route_is_recorded_and_no_value_ever_is(api: Api) -> None:
    """Each mutating route an API key may call, called as the owner tenant's admin (or the
    system admin for the system's routes): one entry each, but for the run submissions."""
    world = _build_world(api)
    owner_admin = api.as_key(
        api.store.access.create_api_key(world.ids["tenant_id"], Role.ADMIN, "auditor")[1]
    )
    called = []
    for method, path, operation in ROUTES:
        need = needs(method, path, operation)
        if method == "GET" or need not in KEY_ROUTES | {Needs.SYSTEM_ADMIN}:
            continue
        headers = api.admin if need is Needs.SYSTEM_ADMIN else owner_admin
        body = world.body(method, path) or {"note": SECRET}
        api.http.request(method, world.url(path), headers=headers, json=body)
        called.append((method, path, need))
    recorded = {
        (entry["method"], entry["route"])
        for headers in (api.admin, owner_admin)
        for entry in entries(api, headers, limit=1000)
    }
    for method, path, _ in called:
        assert ((method, path) in recorded) == ((method, path) not in UNAUDITED_ROUTES), path
    assert len(called) >= 30
    assert SECRET not in stored_rows_text(api)  # the world's job has it in its env


def test_an_entry_says_who_what_and_when_with_the_names_of_the_fields_only(api: Api) -> None:
    key, token = api.store.access.create_api_key(api.tenant_id, Role.DEVELOPER, "deployer")
    deployer = api.as_key(token)
    job = api.http.post(
        "/v1/jobs",
        headers=deployer,
        json={"name": "j", "runtime": "shell", "command": "echo s3cr3t", "env": {"PW": "hunter2"}},
    ).json()
    patched = api.http.patch(
        f"/v1/jobs/{job['id']}",
        headers=deployer,
        json={"env": {"PW": "hunter3"}, "timeout_seconds": 9},
    )
    assert patched.status_code == 200
    [update, create] = entries(api, key_id=key.id)
    assert create == {
        "id": create["id"], "tenant_id": api.tenant_id, "key_id": key.id,
        "key_name": "deployer", "role": "developer", "action": "jobs.create", "method": "POST",
        "route": "/v1/jobs", "object_type": "jobs", "object_id": job["id"],
        "fields": ["command", "env", "name", "runtime"], "status": 201,
        "created_at": create["created_at"], "outcome": "succeeded",
        "actor": f"user:{key.id}", "actor_name": "deployer",
    }  # fmt: skip
    assert (update["action"], update["object_id"]) == ("jobs.update", job["id"])
    assert update["fields"] == ["env", "timeout_seconds"]
    assert update["created_at"] >= create["created_at"]
    for value in ("hunter2", "hunter3", "s3cr3t", token.rpartition(".")[2]):
        assert value not in stored_rows_text(api)


def test_a_refused_change_is_recorded_as_refused_without_its_fields(api: Api) -> None:
    job = api.create_job()
    viewer_key, token = api.store.access.create_api_key(api.tenant_id, Role.VIEWER, "intern")
    response = api.http.delete(f"/v1/jobs/{job['id']}", headers=api.as_key(token))
    assert response.status_code == 403
    bad = api.http.post("/v1/jobs", headers=api.admin, json={"name": "x", "Hunter2": "pw"})
    assert bad.status_code == 422
    [refused] = entries(api, key_id=viewer_key.id)
    assert (refused["action"], refused["status"], refused["outcome"]) == (
        "jobs.delete", 403, "refused",
    )  # fmt: skip
    assert (refused["role"], refused["key_name"]) == ("viewer", "intern")
    invalid = entries(api, object_type="jobs")[0]
    assert (invalid["status"], invalid["fields"]) == (422, [])
    assert "Hunter2" not in stored_rows_text(api)


def test_run_submissions_are_left_to_their_run_events(api: Api) -> None:
    job = api.create_job()
    run = api.start_run(job["id"])
    cancelled = api.http.post(f"/v1/runs/{run['id']}/cancel", headers=api.admin)
    assert cancelled.status_code == 200
    actions = [entry["action"] for entry in entries(api)]
    assert actions == ["runs.cancel", "jobs.create"]
    events = api.http.get(f"/v1/runs/{run['id']}/events", headers=api.admin).json()
    assert events[0]["actor"] == f"user:{api.admin_key.split('.')[-2]}"


def test_filters_and_pages_newest_first(api: Api) -> None:
    jobs = [api.create_job(f"j{index}")["id"] for index in range(3)]
    newest_first = entries(api)
    assert [entry["object_id"] for entry in newest_first] == jobs[::-1]
    assert [entry["object_id"] for entry in entries(api, object_id=jobs[1])] == [jobs[1]]
    assert entries(api, object_type="schedules") == []
    since = newest_first[1]["created_at"]
    assert {entry["object_id"] for entry in entries(api, since=since)} >= {jobs[1], jobs[2]}
    assert entries(api, until=newest_first[-1]["created_at"]) == []
    first = api.http.get("/v1/audit", headers=api.admin, params={"limit": 2}).json()
    rest = api.http.get(
        "/v1/audit", headers=api.admin, params={"limit": 2, "cursor": first["next_cursor"]}
    ).json()
    assert [entry["object_id"] for entry in first["items"] + rest["items"]] == jobs[::-1]
    assert rest["next_cursor"] is None


def test_a_tenant_reads_only_its_own_log_and_a_system_admin_any(api: Api) -> None:
    tenant = api.store.access.create_tenant("team")
    team = api.as_key(api.store.access.create_api_key(tenant.id, Role.ADMIN, "team admin")[1])
    api.create_job("system-job")
    made = api.http.post(
        "/v1/jobs", headers=team, json={"name": "t", "runtime": "shell", "command": "true"}
    )
    assert made.status_code == 201
    assert [entry["object_id"] for entry in entries(api, team)] == [made.json()["id"]]
    other = api.http.get("/v1/audit", headers=team, params={"tenant_id": api.tenant_id})
    assert other.status_code == 404
    assert "system-job" not in other.text
    as_system = entries(api, api.admin, tenant_id=tenant.id)
    assert [entry["key_name"] for entry in as_system] == ["team admin"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-01-01T00:00:00"}, "until"),
        ({"limit": 0}, "limit"),
        ({"cursor": "x"}, "cursor"),
        ({"object_id": "x" * 256}, "object_id"),
        ({"object_type": "x" * 65}, "object_type"),
        ({"key_id": "k" * 41}, "key_id"),
    ],
)
def test_bad_audit_queries_get_422_naming_the_field(
    api: Api, params: dict[str, Any], field: str
) -> None:
    response = api.http.get("/v1/audit", headers=api.admin, params=params)
    assert response.status_code == 422, response.text
    assert field in [error["field"] for error in response.json()["errors"]]


def test_a_system_admins_change_to_a_tenant_is_in_that_tenants_log_too(api: Api) -> None:
    tenant = api.store.access.create_tenant("team")
    key = api.store.access.create_api_key(tenant.id, Role.DEVELOPER, "leaked")[0]
    team = api.as_key(api.store.access.create_api_key(tenant.id, Role.ADMIN, "team admin")[1])
    patched = api.http.patch(f"/v1/tenants/{tenant.id}", headers=api.admin, json={"weight": 2})
    assert patched.status_code == 200
    assert api.http.post(f"/v1/keys/{key.id}/revoke", headers=api.admin).status_code == 200
    seen_by_team = [
        (entry["action"], entry["object_id"], entry["key_name"]) for entry in entries(api, team)
    ]
    assert seen_by_team == [
        ("keys.revoke", key.id, "bootstrap admin"),
        ("tenants.update", tenant.id, "bootstrap admin"),
    ]
    assert [entry["action"] for entry in entries(api)] == ["keys.revoke", "tenants.update"]
    intruder = api.as_key(api.other_tenant_key("intruder"))
    refused = api.http.patch(f"/v1/tenants/{tenant.id}", headers=intruder, json={"weight": 9})
    assert refused.status_code == 403
    assert len(entries(api, team)) == 2  # a refused call is only in the caller's own log
