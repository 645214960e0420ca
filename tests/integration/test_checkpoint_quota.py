"""A tenant's checkpoints, all its runs' together, are bounded by its ``max_checkpoint_mb``
(issue 40, item 7): a save that would pass it is a 409 naming the quota and the run keeps its
previous checkpoint; a run's own previous checkpoint, which the save replaces, does not
count. Every tenant has the bound unless an admin clears it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from herder.domain.checkpoints import DEFAULT_MAX_CHECKPOINT_MB, MIB
from tests.integration.conftest import Api, Herder
from tests.integration.registered import register_worker
from tests.integration.test_checkpoint_store import info, save, two_running
from tests.integration.test_cli_admin import ok
from tests.integration.test_tenants import create_tenant

KIB = 1024


def set_quota(api: Api, tenant_id: str, max_checkpoint_mb: int | None) -> Any:
    return api.http.patch(
        f"/v1/tenants/{tenant_id}",
        headers=api.admin,
        json={"quotas": {"max_checkpoint_mb": max_checkpoint_mb}},
    )


def test_a_save_past_the_tenants_quota_is_409_naming_it_and_the_previous_is_kept(
    api: Api,
) -> None:
    assert set_quota(api, api.tenant_id, 1).status_code == 200
    worker = register_worker(api)
    first, second = two_running(api, worker)
    assert save(api, worker, first, b"a" * (600 * KIB)).status_code == 204
    assert save(api, worker, second, b"b" * (100 * KIB)).status_code == 204

    refused = save(api, worker, second, b"c" * (600 * KIB))
    assert refused.status_code == 409, refused.text
    assert refused.json()["field"] == "max_checkpoint_mb"
    assert "would take the tenant past its max_checkpoint_mb (1 MiB" in refused.json()["detail"]
    assert info(api, second["run_id"]).json()["stored_bytes"] == 100 * KIB  # kept

    # The first run's own checkpoint is replaced, not added to: 900 KiB beside 100 fits.
    assert save(api, worker, first, b"d" * (900 * KIB)).status_code == 204
    assert info(api, first["run_id"]).json()["stored_bytes"] == 900 * KIB


def test_a_cleared_quota_is_unlimited(api: Api) -> None:
    assert set_quota(api, api.tenant_id, None).json()["quotas"]["max_checkpoint_mb"] is None
    tenant = api.http.get(f"/v1/tenants/{api.tenant_id}", headers=api.admin).json()
    assert tenant["quotas"]["max_checkpoint_mb"] is None  # kept as cleared, not the default
    worker = register_worker(api)
    first, _ = two_running(api, worker)
    assert save(api, worker, first, b"x" * (2 * MIB)).status_code == 204


def test_every_tenant_has_the_default_until_it_is_changed(api: Api) -> None:
    tenant: Any = create_tenant(api, "team-a", quotas={"max_gpus": 4})
    assert tenant["quotas"]["max_checkpoint_mb"] == DEFAULT_MAX_CHECKPOINT_MB
    changed = set_quota(api, tenant["id"], 8192).json()
    assert changed["quotas"]["max_checkpoint_mb"] == 8192
    again = api.http.get(f"/v1/tenants/{tenant['id']}", headers=api.admin).json()
    assert again["quotas"] == changed["quotas"]


@pytest.mark.parametrize("value", [0, -1, "lots"])
def test_a_bad_quota_is_a_422_naming_it(api: Api, value: object) -> None:
    response = api.http.patch(
        f"/v1/tenants/{api.tenant_id}",
        headers=api.admin,
        json={"quotas": {"max_checkpoint_mb": value}},
    )
    assert response.status_code == 422, response.text
    assert [error["field"] for error in response.json()["errors"]] == ["quotas.max_checkpoint_mb"]


def test_the_cli_sets_shows_and_clears_it(herder: Herder) -> None:
    created = json.loads(
        ok(herder("tenant", "create", "team-a", "--max-checkpoint-mb", "512", "--json"))
    )
    assert created["quotas"]["max_checkpoint_mb"] == 512
    table = ok(herder("tenant", "update", "team-a", "--max-checkpoint-mb", "1024"))
    assert "MAX CHECKPOINTS" in table
    assert "1024 MiB" in table
    ok(herder("tenant", "update", "team-a", "--clear", "max-checkpoint-mb"))
    shown = json.loads(ok(herder("tenant", "show", created["id"], "--json")))
    assert shown["quotas"]["max_checkpoint_mb"] is None
