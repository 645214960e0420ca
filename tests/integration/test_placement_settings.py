"""A dispatcher keeps the tenants, pools and budgets it read while nothing changes them, and
reads them again at the first pass after a change: every write to those tables moves
``placement_settings``' version in its own transaction (triggers, on both stores), and a
pass reads the version after the queue, so a run submitted after a change is placed by it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select

from herder.domain.models import Tenant as Tenant_
from herder.store import access
from herder.store.schema import placement_settings
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import register_worker
from tests.integration.test_hand_off import statements_sent
from tests.integration.test_pools import Tenant, make_pool
from tests.integration.test_run_outputs import run_detail


def version(api: Api) -> int:
    with api.store.database.read() as connection:
        found: int = connection.execute(select(placement_settings.c.version)).scalar_one()
        return found


def ok(response: Any) -> Any:
    assert response.status_code < 300, response.text
    return response.json() if response.content else None


CHANGES: list[tuple[str, Callable[[Api, Tenant], Any]]] = [
    ("a tenant made", lambda api, ml: Tenant(api, "another")),
    ("its quotas", lambda api, ml: ok(api.http.patch(
        f"/v1/tenants/{ml.id}", headers=api.admin, json={"quotas": {"max_cpu": 3}}))),
    ("its weight", lambda api, ml: ok(api.http.patch(
        f"/v1/tenants/{ml.id}", headers=api.admin, json={"weight": 4}))),
    ("a pool made", lambda api, ml: make_pool(api, "other", selector={"box": "other"})),
    ("its shares", lambda api, ml: ok(api.http.patch(
        "/v1/pools/a100", headers=api.admin, json={"shares": [{"tenant_id": ml.id, "cpu": 2}]}))),
    ("a default pool", lambda api, ml: ok(api.http.patch(
        f"/v1/tenants/{ml.id}", headers=api.admin, json={"default_pool": "a100"}))),
    ("budgets", lambda api, ml: ok(api.http.put(
        f"/v1/tenants/{ml.id}/budgets", headers=api.admin,
        json={"budgets": [{"period": "day", "cpu_seconds": 10}]}))),
    ("a pool deleted", lambda api, ml: ok(api.http.delete("/v1/pools/spare", headers=api.admin))),
]  # fmt: skip


@pytest.mark.parametrize(("change", "made"), CHANGES, ids=[change for change, _ in CHANGES])
def test_every_change_placement_reads_moves_the_version(
    api: Api, change: str, made: Callable[[Api, Tenant], Any]
) -> None:
    ml = Tenant(api, "ml")
    make_pool(api, "a100", selector={"gpu": "a100"}, shares=[{"tenant_id": ml.id}])
    make_pool(api, "spare", selector={"box": "spare"})
    before = version(api)
    made(api, ml)
    assert version(api) > before, change


def test_a_pool_made_after_a_pass_takes_its_workers_from_the_next(api: Api) -> None:
    register_worker(api, "gpu-box", labels={"gpu": "a100"})
    job = api.create_job("job", resources={"cpu": 1})
    first = api.start_run(job["id"])
    dispatch(api.store)  # the settings kept: no pool yet
    assert run_detail(api, first["id"])["state"] == "running"
    make_pool(api, "a100", selector={"gpu": "a100"})  # the worker is the pool's now
    second = api.start_run(job["id"])
    dispatch(api.store)
    assert run_detail(api, second["id"])["state"] == "queued"


def test_a_pass_with_nothing_changed_reads_the_version_not_the_settings(api: Api) -> None:
    api.start_run(api.create_job("waits", resources={"cpu": 64})["id"])  # fits no worker
    register_worker(api)
    sent = []
    for _ in range(2):
        before = statements_sent()
        api.store.placement.snapshot(quick=True)
        sent.append(statements_sent() - before)
    assert sent[1] <= sent[0] - 3  # the tenants, the pools' shares and selectors, the budgets


def test_a_pool_naming_a_tenant_is_made_while_the_tenants_quotas_change(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool's edit holds the version's row (its trigger) and then takes a key share of
    the tenant's; the tenant's edit holds the tenant's row and then moves the version: it
    must hold the row no stronger than its update does, or the two wait on each other."""
    if not api.store.database.is_postgres:
        pytest.skip("SQLite has one writer: no two edits at once")
    ml = Tenant(api, "ml")
    locked, let_go, made = threading.Event(), threading.Event(), threading.Event()
    tenant = Tenant_

    class Paused:
        """The tenant's edit, paused with its row held."""

        @staticmethod
        def model_validate(row: Any) -> Any:
            locked.set()
            let_go.wait(10)
            return tenant.model_validate(row)

    monkeypatch.setattr(access, "Tenant", Paused)
    changed: list[Any] = []
    editing = threading.Thread(target=lambda: changed.append(
        api.store.access.update_tenant(ml.id, quota_changes={"max_cpu": 3})))  # fmt: skip
    editing.start()
    assert locked.wait(10)

    def make() -> None:
        make_pool(api, "a100", shares=[{"tenant_id": ml.id}])
        made.set()

    making = threading.Thread(target=make)
    making.start()
    try:
        assert made.wait(10), "the pool's edit waited on the tenant's"
    finally:
        let_go.set()
        editing.join(20)
        making.join(20)
    (tenant_now,) = changed
    assert tenant_now.quotas.max_cpu == 3
