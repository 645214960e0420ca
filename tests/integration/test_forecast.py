"""GET /v1/forecast: what a tenant's schedules foretell, minute by minute, on both stores; never
another tenant's; a pool the tenant may not use is 404; a window out of range a 422; only
fires from now on."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from herder.api.app import create_app
from herder.domain.models import Role
from herder.settings import Settings
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.integration.conftest import Api


class Tenant:
    def __init__(self, api: Api, name: str) -> None:
        self.id = api.store.access.create_tenant(name).id
        self.headers = api.as_key(api.store.access.create_api_key(self.id, Role.ADMIN, "k")[1])


def every_minute(api: Api, tenant: Tenant, count: int, **job: Any) -> None:
    body = {"name": "tick", "runtime": "shell", "command": "true",
            "resources": {"cpu": 0.5, "memory_mb": 128}, **job}  # fmt: skip
    created = api.http.post("/v1/jobs", headers=tenant.headers, json=body)
    assert created.status_code == 201, created.text
    for _ in range(count):
        schedule = {"job_id": created.json()["id"], "cron": "* * * * *"}
        response = api.http.post("/v1/schedules", headers=tenant.headers, json=schedule)
        assert response.status_code == 201, response.text


def forecast(api: Api, headers: dict[str, str], **params: Any) -> Any:
    return api.http.get("/v1/forecast", headers=headers, params=params)


@pytest.fixture
def ml(api: Api) -> Tenant:
    return Tenant(api, "ml")


def test_a_tenants_schedules_foretell_runs_each_minute_and_what_they_keep_busy(
    api: Api, ml: Tenant
) -> None:
    every_minute(api, ml, 3)
    answer = forecast(api, ml.headers, minutes=3)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["pool"] is None
    later = body["minutes"][1:]
    assert [minute["runs_starting"] for minute in later] == [3, 3]
    # no run yet: a minute each, so each minute's three end as the next three start
    assert [(m["cpu"], m["memory_mb"], m["runs"]) for m in later] == [(1.5, 384, 3)] * 2


def test_another_tenant_sees_none_of_it_and_a_system_admin_sees_all(api: Api, ml: Tenant) -> None:
    every_minute(api, ml, 2)
    other = Tenant(api, "web")
    every_minute(api, other, 1)
    assert forecast(api, other.headers, minutes=2).json()["minutes"][1]["runs_starting"] == 1
    assert forecast(api, api.admin, minutes=2).json()["minutes"][1]["runs_starting"] == 3


def test_one_pools_demand_and_a_pool_the_tenant_may_not_use_is_404(api: Api, ml: Tenant) -> None:
    pool = {"name": "cpu", "shares": [{"tenant_id": ml.id, "cpu": 4}]}
    assert api.http.post("/v1/pools", headers=api.admin, json=pool).status_code == 201
    assert api.http.post("/v1/pools", headers=api.admin, json={"name": "gpu"}).status_code == 201
    every_minute(api, ml, 2, pool="cpu")
    in_pool = forecast(api, ml.headers, pool="cpu", minutes=2).json()
    assert in_pool["pool"] == "cpu"
    assert in_pool["minutes"][1]["runs_starting"] == 2
    for name in ("gpu", "nowhere"):
        refused = forecast(api, ml.headers, pool=name)
        assert refused.status_code == 404, name
    assert forecast(api, api.admin, pool="gpu", minutes=2).json()["minutes"][1]["runs"] == 0


def test_a_paused_schedule_foretells_nothing(api: Api, ml: Tenant) -> None:
    every_minute(api, ml, 1)
    schedules = api.http.get("/v1/schedules", headers=ml.headers).json()["items"]
    paused = api.http.post(f"/v1/schedules/{schedules[0]['id']}/pause", headers=ml.headers)
    assert paused.status_code == 200, paused.text
    minutes = forecast(api, ml.headers, minutes=3).json()["minutes"]
    assert sum(minute["runs_starting"] for minute in minutes) == 0


def test_a_tenant_leaving_for_another_cell_foretells_nothing_here(api: Api, ml: Tenant) -> None:
    every_minute(api, ml, 2)
    other = Tenant(api, "web")
    every_minute(api, other, 1)
    frozen = {"state": "frozen", "cell": "b", "pools": []}
    shifted = api.http.put(f"/v1/tenants/{ml.id}/move", headers=api.admin, json=frozen)
    assert shifted.status_code == 200, shifted.text
    assert forecast(api, api.admin, minutes=2).json()["minutes"][1]["runs_starting"] == 1


@pytest.mark.parametrize("minutes", ["0", "1441", "soon", "-5"])
def test_a_window_out_of_range_is_a_422_naming_minutes(api: Api, ml: Tenant, minutes: str) -> None:
    refused = forecast(api, ml.headers, minutes=minutes)
    assert refused.status_code == 422, refused.text
    assert [error["field"] for error in refused.json()["errors"]] == ["minutes"]


def test_fires_already_behind_now_are_not_foretold(database_url: str, tmp_path: Path) -> None:
    """Schedules made at 04:07:01 first fire at 04:08: nothing starts at 04:07, and 04:08's
    peak is the 30 runs of 04:08 alone (a minute each: busy over [04:08, 04:09))."""
    clock = ManualClock(datetime(2026, 12, 6, 4, 7, 1, tzinfo=UTC))
    store = Store(database_url, clock=clock)
    try:
        bootstrap = store.access.bootstrap()
        assert bootstrap is not None
        settings = Settings(home=tmp_path, database_url=database_url)
        with TestClient(create_app(store, settings)) as http:
            api = Api(http, store, bootstrap.admin_key, bootstrap.worker_token, "")
            ml = Tenant(api, "ml")
            every_minute(api, ml, 30)
            [schedule, *_] = http.get("/v1/schedules", headers=ml.headers).json()["items"]
            assert schedule["next_fire_at"].startswith("2026-12-06T04:08:00")
            minutes = forecast(api, ml.headers, minutes=3).json()["minutes"]
    finally:
        store.close()
    assert [minute["at"][11:16] for minute in minutes] == ["04:07", "04:08", "04:09"]
    assert [minute["runs_starting"] for minute in minutes] == [0, 30, 30]
    assert [minute["runs"] for minute in minutes] == [0, 30, 30]
