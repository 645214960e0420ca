"""``GET /v1/keys/current``: the calling key's tenant and role, for any key — how the
dashboard knows which actions to offer (the API still checks each)."""

from __future__ import annotations

from herder.domain.models import Role
from tests.integration.conftest import Api


def test_each_key_is_told_its_own_role_and_tenant(api: Api) -> None:
    for role in Role:
        key_id, token = api.store.access.create_api_key(api.tenant_id, role, f"as-{role}")
        response = api.http.get("/v1/keys/current", headers=api.as_key(token))
        assert response.status_code == 200, response.text
        assert response.json() == {
            "tenant_id": api.tenant_id, "role": role, "key_id": key_id.id,
            "is_system": True, "key_name": f"as-{role}",
            "user_id": None, "user_name": "", "email": "",  # a key is no signed-in person
        }  # fmt: skip


def test_a_missing_or_unknown_key_is_told_nothing(api: Api) -> None:
    assert api.http.get("/v1/keys/current").status_code == 401
    unknown = api.as_key("key_01M8H6Q3P14PFE5XP2TX4QMZ2S.nope")
    assert api.http.get("/v1/keys/current", headers=unknown).status_code == 401
    other = api.http.get("/v1/keys/current", headers=api.as_key(api.other_tenant_key()))
    assert other.json()["tenant_id"] != api.tenant_id
    assert other.json()["is_system"] is False
