"""A tenant's retention: 1825 days unless a system admin sets fewer (1..1825), read back
with the tenant; anything else is a 422 naming the field."""

from __future__ import annotations

import pytest

from herder.domain.models import Role
from tests.integration.conftest import Api


def test_a_tenant_keeps_five_years_until_a_system_admin_shortens_it(api: Api) -> None:
    created = api.http.post("/v1/tenants", headers=api.admin, json={"name": "team-a"}).json()
    assert created["retention_days"] == 1825
    url = f"/v1/tenants/{created['id']}"
    changed = api.http.patch(url, headers=api.admin, json={"retention_days": 30})
    assert changed.status_code == 200, changed.text
    assert changed.json()["retention_days"] == 30
    assert api.http.get(url, headers=api.admin).json()["retention_days"] == 30
    # a change of something else keeps it
    api.http.patch(url, headers=api.admin, json={"weight": 2})
    assert api.http.get(url, headers=api.admin).json()["retention_days"] == 30


@pytest.mark.parametrize("days", [0, -1, 1826, 10**12, None, "thirty", 7.5, [], {}])
def test_a_retention_outside_1_to_1825_days_gets_422_naming_the_field(
    api: Api, days: object
) -> None:
    created = api.http.post("/v1/tenants", headers=api.admin, json={"name": "team-a"}).json()
    body = {"retention_days": days}
    response = api.http.patch(f"/v1/tenants/{created['id']}", headers=api.admin, json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert [error["field"] for error in response.json()["errors"]] == ["retention_days"]


def test_a_tenants_own_admin_cannot_change_its_retention(api: Api) -> None:
    created = api.http.post("/v1/tenants", headers=api.admin, json={"name": "team-a"}).json()
    own_admin = api.as_key(api.store.access.create_api_key(created["id"], Role.ADMIN, "a")[1])
    body = {"retention_days": 1}
    response = api.http.patch(f"/v1/tenants/{created['id']}", headers=own_admin, json=body)
    assert response.status_code == 403
    assert api.store.access.get_tenant(created["id"]).retention_days == 1825
