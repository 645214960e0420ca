"""API keys as a tenant's admins manage them: listed without secrets, read, revoked (at once,
idempotently), expiring at their time, their last use kept to the minute; never a tenant
locked out by its own admins; another tenant's keys invisible (docs/tenants.md)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from herder.api.app import create_app
from herder.domain.models import Role
from herder.settings import Settings
from herder.store import access as access_module
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.integration.conftest import Api


class Clocked(Api):
    clock: ManualClock


@pytest.fixture
def api(database_url: str, tmp_path: Path) -> Iterator[Clocked]:
    """The usual API, on a store whose clock the test moves."""
    clock = ManualClock()
    store = Store(database_url, clock=clock)
    bootstrap = store.access.bootstrap()
    assert bootstrap is not None
    settings = Settings(home=tmp_path, database_url=database_url)
    with TestClient(create_app(store, settings)) as http:
        api = Clocked(http, store, bootstrap.admin_key, bootstrap.worker_token, bootstrap.tenant.id)
        api.clock = clock
        yield api
    store.close()


def create_key(api: Clocked, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    """A key of the caller's tenant, made a second after the last (so the newest is last)."""
    api.clock.advance(1)
    response = api.http.post("/v1/keys", headers=headers, json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def tenant_admin(api: Api, name: str = "team") -> tuple[str, dict[str, str]]:
    tenant = api.store.access.create_tenant(name)
    return tenant.id, api.as_key(api.store.access.create_api_key(tenant.id, Role.ADMIN, "a")[1])


def field_of(response: Any) -> list[str]:
    assert response.status_code == 422, response.text
    return [error["field"] for error in response.json()["errors"]]


def test_a_listing_shows_every_key_newest_first_and_never_a_secret(api: Clocked) -> None:
    created = create_key(api, api.admin, name="ci", role="operator")
    listed = api.http.get("/v1/keys", headers=api.admin)
    assert listed.status_code == 200
    [newest, bootstrap] = listed.json()["items"]
    assert newest == {
        "id": created["id"], "tenant_id": api.tenant_id, "name": "ci", "role": "operator",
        "created_at": newest["created_at"], "expires_at": None, "last_used_at": None,
        "revoked_at": None,
    }  # fmt: skip
    assert bootstrap["role"] == "admin"
    for secret in (created["token"].rpartition(".")[2], api.admin_key.rpartition(".")[2]):
        assert secret not in listed.text
    assert "hash" not in listed.text
    assert api.http.get(f"/v1/keys/{created['id']}", headers=api.admin).json() == newest


def test_keys_page_with_a_cursor(api: Clocked) -> None:
    made = [create_key(api, api.admin, name=f"k{index}")["id"] for index in range(3)]
    seen: list[str] = []
    cursor = ""
    while True:
        page = api.http.get(
            "/v1/keys", headers=api.admin, params={"limit": 2, "cursor": cursor}
        ).json()
        seen += [key["id"] for key in page["items"]]
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
    assert seen[:3] == made[::-1]
    assert len(seen) == 4


def test_a_revoked_key_is_refused_at_once_saying_so_and_revoking_again_changes_nothing(
    api: Clocked,
) -> None:
    created = create_key(api, api.admin, name="leaked")
    leaked = api.as_key(created["token"])
    assert api.http.get("/v1/jobs", headers=leaked).status_code == 200  # now in the cache
    revoked = api.http.post(f"/v1/keys/{created['id']}/revoke", headers=api.admin)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] == api.clock.now().isoformat().replace("+00:00", "Z")
    refused = api.http.get("/v1/jobs", headers=leaked)
    assert refused.status_code == 401
    assert f"API key {created['id']} was revoked at" in refused.json()["detail"]
    api.clock.advance(60)
    again = api.http.post(f"/v1/keys/{created['id']}/revoke", headers=api.admin)
    assert again.status_code == 200
    assert again.json() == revoked.json()  # the first revocation's time stays


def test_another_server_stops_admitting_a_revoked_key_within_its_cache_time(
    api: Clocked, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seconds = [1000.0]
    monkeypatch.setattr(access_module, "time", type("T", (), {"monotonic": lambda: seconds[0]}))
    other_server = Store(database_url, clock=api.clock)
    try:
        token = create_key(api, api.admin, name="k")["token"]
        assert other_server.access.authenticate(token).key_id == token.split(".")[-2]
        api.http.post(f"/v1/keys/{token.split('.')[-2]}/revoke", headers=api.admin)
        assert other_server.access.recent_principal(token) is not None  # within the TTL
        seconds[0] += access_module._RecentlyChecked.TTL_SECONDS + 0.1
        assert other_server.access.recent_principal(token) is None
        with pytest.raises(Exception, match="was revoked"):
            other_server.access.authenticate(token)
    finally:
        other_server.close()


def test_a_key_stops_working_at_its_expiry_even_while_cached(api: Clocked) -> None:
    expiry = api.clock.now() + timedelta(hours=1, seconds=1)  # an hour after it is made
    created = create_key(api, api.admin, name="temp", expires_at=expiry.isoformat())
    assert created["expires_at"] == expiry.isoformat().replace("+00:00", "Z")
    temporary = api.as_key(created["token"])
    assert api.http.get("/v1/jobs", headers=temporary).status_code == 200
    api.clock.advance(3599)
    assert api.http.get("/v1/jobs", headers=temporary).status_code == 200
    api.clock.advance(1)
    refused = api.http.get("/v1/jobs", headers=temporary)
    assert refused.status_code == 401
    assert f"API key {created['id']} expired at" in refused.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expires_at": "2020-01-01T00:00:00Z"}, "expires_at"),  # the past
        ({"expires_at": "next tuesday"}, "expires_at"),
        ({"expires_at": "2030-01-01T00:00:00"}, "expires_at"),  # no offset
        ({"expires_at": 1900000000}, "expires_at"),  # seconds are no time here
        ({"role": "root"}, "role"),
        ({"name": ""}, "name"),
        ({"name": "x" * 129}, "name"),
        ({"secret": "mine"}, "secret"),
        ({"role": None}, "role"),
        ({"expires_at": "10000-01-01T00:00:00Z"}, "expires_at"),
        ({"name": ["a"]}, "name"),
    ],
)
def test_bad_key_input_gets_422_naming_the_field(
    api: Clocked, body: dict[str, Any], field: str
) -> None:
    assert field in field_of(api.http.post("/v1/keys", headers=api.admin, json=body))


def test_the_last_use_is_kept_to_the_minute_without_a_write_per_request(api: Clocked) -> None:
    created = create_key(api, api.admin, name="busy")
    key_id, busy = created["id"], api.as_key(created["token"])

    def last_used() -> str | None:
        used: str | None = api.store.keys.get(key_id).model_dump(mode="json")["last_used_at"]
        return used

    api.http.get("/v1/jobs", headers=busy)
    first = last_used()
    assert first == api.clock.now().isoformat().replace("+00:00", "Z")
    for _ in range(5):  # the store is asked again each time: the cache forgets the key
        api.clock.advance(10)
        api.store.access.forget_key(key_id)
        api.http.get("/v1/jobs", headers=busy)
    assert last_used() == first  # 50 s later: not written again
    api.clock.advance(10)
    api.store.access.forget_key(key_id)
    api.http.get("/v1/jobs", headers=busy)
    assert last_used() == api.clock.now().isoformat().replace("+00:00", "Z")


def test_the_system_tenants_last_admin_key_cannot_be_revoked(api: Clocked) -> None:
    bootstrap_id = api.admin_key.split(".")[-2]
    refused = api.http.post(f"/v1/keys/{bootstrap_id}/revoke", headers=api.admin)
    assert refused.status_code == 409
    assert "last live admin key" in refused.json()["detail"]
    second = create_key(api, api.admin, name="second admin", role="admin")
    assert api.http.post(f"/v1/keys/{bootstrap_id}/revoke", headers=api.admin).status_code == 200
    assert api.http.get("/v1/jobs", headers=api.admin).status_code == 401
    successor = api.as_key(second["token"])
    assert api.http.post(f"/v1/keys/{second['id']}/revoke", headers=successor).status_code == 409


def test_an_expired_admin_key_is_no_admin_left_standing(api: Clocked) -> None:
    expiry = (api.clock.now() + timedelta(minutes=5)).isoformat()
    create_key(api, api.admin, name="brief admin", role="admin", expires_at=expiry)
    api.clock.advance(600)
    bootstrap_id = api.admin_key.split(".")[-2]
    assert api.http.post(f"/v1/keys/{bootstrap_id}/revoke", headers=api.admin).status_code == 409


def test_a_tenant_admin_cannot_revoke_its_tenants_last_admin_key_but_a_system_admin_can(
    api: Clocked,
) -> None:
    tenant_id, admin = tenant_admin(api)
    [own] = api.http.get("/v1/keys", headers=admin).json()["items"]
    assert api.http.post(f"/v1/keys/{own['id']}/revoke", headers=admin).status_code == 409
    assert api.http.post(f"/v1/keys/{own['id']}/revoke", headers=api.admin).status_code == 200
    assert api.http.get("/v1/jobs", headers=admin).status_code == 401
    listed = api.http.get("/v1/keys", headers=api.admin, params={"tenant_id": tenant_id})
    assert [key["revoked_at"] is not None for key in listed.json()["items"]] == [True]


def test_another_tenants_keys_are_not_found_and_not_listed(api: Clocked) -> None:
    owner_id, owner = tenant_admin(api, "owner")
    _, intruder = tenant_admin(api, "intruder")
    key = create_key(api, owner, name="owner's")
    for method, path in [
        ("GET", f"/v1/keys/{key['id']}"),
        ("POST", f"/v1/keys/{key['id']}/revoke"),
    ]:
        response = api.http.request(method, path, headers=intruder)
        assert response.status_code == 404, response.text
        assert "owner's" not in response.text
    listed = api.http.get("/v1/keys", headers=intruder, params={"tenant_id": owner_id})
    assert listed.status_code == 404
    assert key["id"] not in api.http.get("/v1/keys", headers=intruder).text
    assert api.http.get("/v1/jobs", headers=api.as_key(key["token"])).status_code == 200


@pytest.mark.parametrize("role", [Role.VIEWER, Role.OPERATOR, Role.DEVELOPER])
def test_only_admins_manage_keys(api: Clocked, role: Role) -> None:
    caller = api.as_key(api.store.access.create_api_key(api.tenant_id, role, "not admin")[1])
    bootstrap_id = api.admin_key.split(".")[-2]
    for method, path in [
        ("GET", "/v1/keys"), ("POST", "/v1/keys"), ("GET", f"/v1/keys/{bootstrap_id}"),
        ("POST", f"/v1/keys/{bootstrap_id}/revoke"), ("GET", "/v1/audit"),
    ]:  # fmt: skip
        body = {"role": "admin"} if method == "POST" else None
        response = api.http.request(method, path, headers=caller, json=body)
        assert response.status_code == 403, (method, path, response.text)
    assert api.http.get("/v1/jobs", headers=api.admin).status_code == 200  # not revoked


@pytest.mark.parametrize(
    "key_id", ["key_00000000000000000000000000", "key_..%2Fjobs", "x" * 5000, "key_%00", "ключ"]
)
def test_odd_key_ids_are_not_found(api: Clocked, key_id: str) -> None:
    for method, suffix in [("GET", ""), ("POST", "/revoke")]:
        response = api.http.request(method, f"/v1/keys/{key_id}{suffix}", headers=api.admin)
        assert response.status_code in (404, 422), response.text
        assert response.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize(
    ("params", "field"),
    [({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"cursor": "nope"}, "cursor"),
     ({"tenant_id": "t" * 41}, "tenant_id")],
)  # fmt: skip
def test_bad_listing_input_gets_422_naming_the_field(
    api: Clocked, params: dict[str, Any], field: str
) -> None:
    assert field in field_of(api.http.get("/v1/keys", headers=api.admin, params=params))


def test_the_tenant_route_still_creates_keys_with_an_expiry(api: Clocked) -> None:
    tenant_id, _ = tenant_admin(api)
    expiry = (api.clock.now() + timedelta(days=90)).isoformat()
    response = api.http.post(
        f"/v1/tenants/{tenant_id}/keys",
        headers=api.admin,
        json={"role": "operator", "name": "ops", "expires_at": expiry},
    )
    assert response.status_code == 201, response.text
    key = api.http.get(f"/v1/keys/{response.json()['id']}", headers=api.admin).json()
    assert (key["tenant_id"], key["role"], key["name"]) == (tenant_id, "operator", "ops")
    assert key["expires_at"] is not None


def test_a_revoked_or_expired_keys_state_is_told_only_to_whoever_holds_its_secret(
    api: Clocked,
) -> None:
    victim = create_key(api, api.admin, name="victim")
    api.http.post(f"/v1/keys/{victim['id']}/revoke", headers=api.admin)
    forged = f"{victim['id']}.{api.admin_key.rpartition('.')[2]}"  # another key's secret
    response = api.http.get("/v1/jobs", headers=api.as_key(forged))
    assert response.status_code == 401
    assert response.json()["detail"] == "unknown or revoked API key"


def test_a_revoked_admin_key_can_neither_revoke_nor_make_keys(api: Clocked) -> None:
    second = create_key(api, api.admin, name="second", role="admin")
    api.http.post(f"/v1/keys/{second['id']}/revoke", headers=api.admin)
    revoked = api.as_key(second["token"])
    bootstrap_id = api.admin_key.split(".")[-2]
    assert api.http.post("/v1/keys", headers=revoked, json={"role": "admin"}).status_code == 401
    assert api.http.post(f"/v1/keys/{bootstrap_id}/revoke", headers=revoked).status_code == 401
    assert api.http.get("/v1/keys", headers=api.admin).json()["items"][0]["revoked_at"]
