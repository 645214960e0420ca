"""A tenant's named limits through the API (docs/flow-control.md): developers make and change
them, viewers read them, another tenant's limit is not found, a limit that bounds nothing or
bounds by zero is a 422 naming the field, and a limit that jobs name is not deleted."""

from __future__ import annotations

from typing import Any

import pytest
from httpx import Response

from herder.domain.models import Role
from tests.integration.conftest import Api


class Tenant:
    def __init__(self, api: Api, name: str) -> None:
        self.id = api.store.access.create_tenant(name).id
        self.api = api
        self.headers = self.key(Role.DEVELOPER)

    def key(self, role: Role) -> dict[str, str]:
        return self.api.as_key(self.api.store.access.create_api_key(self.id, role, "k")[1])


@pytest.fixture
def acme(api: Api) -> Tenant:
    return Tenant(api, "acme")


def fields(response: Response) -> list[str]:
    assert response.status_code == 422, response.text
    return [error["field"] for error in response.json()["errors"]]


def make_limit(api: Api, tenant: Tenant, name: str = "partner-api", **spec: Any) -> Response:
    body = {"name": name, "max_running": 1, **spec}
    response: Response = api.http.post("/v1/limits", headers=tenant.headers, json=body)
    return response


def test_a_developer_creates_reads_changes_lists_and_deletes_a_limit(
    api: Api, acme: Tenant
) -> None:
    created = make_limit(api, acme, rate={"count": 10, "period_seconds": 60})
    assert created.status_code == 201, created.text
    limit = created.json()
    assert created.headers["ETag"] == '"1"'
    assert created.headers["Location"] == f"/v1/limits/{limit['id']}"
    assert limit["strategy"] == "queue"
    assert limit["rate"] == {"count": 10, "period_seconds": 60}
    viewer = acme.key(Role.VIEWER)
    by_name = api.http.get("/v1/limits/partner-api", headers=viewer)
    assert by_name.status_code == 200
    assert by_name.json()["id"] == limit["id"]
    changed = api.http.patch(
        f"/v1/limits/{limit['id']}",
        headers={**acme.headers, "If-Match": '"1"'},
        json={"max_running": 3, "rate": None},
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["max_running"] == 3
    assert changed.json()["rate"] is None
    assert changed.headers["ETag"] == '"2"'
    stale = api.http.patch(
        "/v1/limits/partner-api", headers={**acme.headers, "If-Match": '"1"'}, json={}
    )
    assert stale.status_code == 412, stale.text
    listed = api.http.get("/v1/limits", headers=viewer).json()
    assert [item["name"] for item in listed["items"]] == ["partner-api"]
    assert api.http.delete("/v1/limits/partner-api", headers=viewer).status_code == 403
    assert api.http.delete("/v1/limits/partner-api", headers=acme.headers).status_code == 204
    assert api.http.get("/v1/limits/partner-api", headers=viewer).status_code == 404


def test_a_name_taken_is_409_and_another_tenants_limit_is_not_found(api: Api, acme: Tenant) -> None:
    assert make_limit(api, acme).status_code == 201
    assert make_limit(api, acme).status_code == 409
    other = Tenant(api, "other")
    assert make_limit(api, other).status_code == 201  # names are per tenant
    mine = api.http.get("/v1/limits/partner-api", headers=acme.headers).json()["id"]
    for method in ("GET", "PATCH", "DELETE"):
        answer = api.http.request(method, f"/v1/limits/{mine}", headers=other.headers, json={})
        assert answer.status_code == 404, answer.text
    assert api.http.get(f"/v1/limits/{mine}/keys", headers=other.headers).status_code == 404


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"max_running": 0}, "max_running"),
        ({"max_running": -1}, "max_running"),
        ({"max_running": None, "rate": {"count": -1, "period_seconds": 60}}, "rate.count"),
        ({"max_running": None, "rate": {"count": 1, "period_seconds": 0}}, "rate.period_seconds"),
        ({"max_running": None, "debounce": {"window_seconds": 0}}, "debounce.window_seconds"),
        ({"max_running": None}, "body"),
        (
            {"max_running": None, "strategy": "drop", "rate": {"count": 1, "period_seconds": 1}},
            "body",
        ),
        ({"strategy": "later"}, "strategy"),
        ({"name": "Partner API"}, "name"),
        ({"name": "a\x00b"}, "name"),
        ({"description": "x" * 1_000_001}, "description"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_a_limit_that_bounds_nothing_or_by_zero_is_a_422_naming_the_field(
    api: Api, acme: Tenant, spec: dict[str, Any], field: str
) -> None:
    response = make_limit(api, acme, **spec)
    if field == "name" and "\x00" in spec.get("name", ""):
        assert response.status_code in (400, 422), response.text
        return
    if field == "description":
        assert response.status_code in (413, 422), response.text
        return
    assert field in fields(response), response.text


def test_a_patch_is_checked_as_a_whole(api: Api, acme: Tenant) -> None:
    assert make_limit(api, acme).status_code == 201
    cleared = api.http.patch(
        "/v1/limits/partner-api", headers=acme.headers, json={"max_running": None}
    )
    assert fields(cleared) == ["body"]
    renamed = api.http.patch("/v1/limits/partner-api", headers=acme.headers, json={"name": "b"})
    assert fields(renamed) == ["name"]
    negative = api.http.patch(
        "/v1/limits/partner-api", headers=acme.headers, json={"max_running": -5}
    )
    assert fields(negative) == ["max_running"]


def test_the_keys_of_a_limit_without_runs_are_none(api: Api, acme: Tenant) -> None:
    assert make_limit(api, acme).status_code == 201
    keys = api.http.get("/v1/limits/partner-api/keys?limit=10", headers=acme.headers)
    assert keys.status_code == 200
    assert keys.json() == []
    zero = api.http.get("/v1/limits/partner-api/keys?limit=0", headers=acme.headers)
    assert fields(zero) == ["limit"]
