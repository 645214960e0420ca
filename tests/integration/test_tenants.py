"""Tenant administration: list, read, change weight and quotas (PATCH semantics), and who may."""

from __future__ import annotations

import pytest

from herder.domain.models import Role
from tests.integration.conftest import Api


def create_tenant(api: Api, name: str, **body: object) -> dict[str, object]:
    response = api.http.post("/v1/tenants", headers=api.admin, json={"name": name, **body})
    assert response.status_code == 201, response.text
    tenant: dict[str, object] = response.json()
    return tenant


def test_a_tenant_is_created_with_quotas_and_read_back(api: Api) -> None:
    tenant = create_tenant(
        api, "team-a", weight=3, quotas={"max_gpus": 4, "submit_rate_per_second": 50}
    )
    fetched = api.http.get(f"/v1/tenants/{tenant['id']}", headers=api.admin).json()
    assert fetched == tenant
    assert fetched["weight"] == 3
    assert fetched["quotas"]["max_gpus"] == 4
    assert fetched["quotas"]["submit_rate_per_second"] == 50
    assert fetched["quotas"]["max_cpu"] is None  # unlimited


def test_system_admins_list_every_tenant_newest_first_with_a_cursor(api: Api) -> None:
    created = [create_tenant(api, f"team-{index}")["id"] for index in range(3)]
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.http.get("/v1/tenants", headers=api.admin, params=params).json()
        seen += [tenant["id"] for tenant in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [*reversed(created), api.tenant_id]


def test_patch_replaces_given_quotas_clears_nulls_and_keeps_the_rest(api: Api) -> None:
    tenant = create_tenant(
        api, "team-a", quotas={"max_gpus": 4, "max_cpu": 8, "submit_rate_per_second": 5}
    )
    response = api.http.patch(
        f"/v1/tenants/{tenant['id']}",
        headers=api.admin,
        json={"weight": 7, "quotas": {"max_gpus": 2, "max_cpu": None, "max_queued": 100}},
    )
    assert response.status_code == 200, response.text
    quotas = response.json()["quotas"]
    assert response.json()["weight"] == 7
    assert quotas["max_gpus"] == 2  # replaced
    assert quotas["max_cpu"] is None  # cleared
    assert quotas["max_queued"] == 100  # added
    assert quotas["submit_rate_per_second"] == 5  # kept
    # Only the weight: the quotas stay as they are.
    again = api.http.patch(f"/v1/tenants/{tenant['id']}", headers=api.admin, json={"weight": 2})
    assert again.json()["quotas"] == quotas
    assert api.http.get(f"/v1/tenants/{tenant['id']}", headers=api.admin).json() == again.json()


def test_patch_with_null_quotas_clears_them_all(api: Api) -> None:
    tenant = create_tenant(api, "team-a", quotas={"max_gpus": 4, "submit_burst": 10})
    response = api.http.patch(
        f"/v1/tenants/{tenant['id']}", headers=api.admin, json={"quotas": None}
    )
    assert set(response.json()["quotas"].values()) == {None}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"weight": 0}, "weight"),
        ({"weight": 1001}, "weight"),
        ({"weight": None}, "weight"),
        ({"quotas": {"max_gpus": -1}}, "quotas.max_gpus"),
        ({"quotas": {"submit_rate_per_second": 0}}, "quotas.submit_rate_per_second"),
        ({"quotas": {"max_disks": 1}}, "quotas.max_disks"),
        ({"name": "renamed"}, "name"),
    ],
)
def test_invalid_changes_get_422_naming_the_field(
    api: Api, body: dict[str, object], field: str
) -> None:
    tenant = create_tenant(api, "team-a")
    response = api.http.patch(f"/v1/tenants/{tenant['id']}", headers=api.admin, json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert any(error["field"] == field for error in response.json()["errors"])


def test_an_unknown_tenant_answers_404(api: Api) -> None:
    missing = "ten_00000000000000000000000000"
    assert api.http.get(f"/v1/tenants/{missing}", headers=api.admin).status_code == 404
    response = api.http.patch(f"/v1/tenants/{missing}", headers=api.admin, json={"weight": 2})
    assert response.status_code == 404
    assert response.json()["title"] == "Not found"


def test_a_tenants_admins_read_only_their_own_tenant(api: Api) -> None:
    team = create_tenant(api, "team-a", quotas={"max_gpus": 1})
    team_admin = api.as_key(api.store.access.create_api_key(str(team["id"]), Role.ADMIN, "a")[1])
    assert api.http.get(f"/v1/tenants/{team['id']}", headers=team_admin).json() == team
    # Another tenant is not theirs to see, nor to know of.
    other = api.http.get(f"/v1/tenants/{api.tenant_id}", headers=team_admin)
    assert other.status_code == 404
    # Only the system admins list tenants and change weights and quotas.
    assert api.http.get("/v1/tenants", headers=team_admin).status_code == 403
    raise_own = api.http.patch(
        f"/v1/tenants/{team['id']}", headers=team_admin, json={"quotas": {"max_gpus": 100}}
    )
    assert raise_own.status_code == 403
    assert api.http.get(f"/v1/tenants/{team['id']}", headers=api.admin).json() == team


def test_a_tenants_developers_may_not_read_it(api: Api) -> None:
    team = create_tenant(api, "team-a")
    developer = api.as_key(api.store.access.create_api_key(str(team["id"]), Role.DEVELOPER, "d")[1])
    assert api.http.get(f"/v1/tenants/{team['id']}", headers=developer).status_code == 403
    system_developer = api.as_key(
        api.store.access.create_api_key(api.tenant_id, Role.DEVELOPER, "d")[1]
    )
    assert api.http.get(f"/v1/tenants/{team['id']}", headers=system_developer).status_code == 404
