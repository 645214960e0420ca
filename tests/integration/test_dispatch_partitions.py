"""Placement partitioned over several dispatchers (docs/placement.md, "Partitions"): each
places only its pools' runs onto its pools' workers; side by side under load, two or three
never over-fill a worker, a tenant's quota, a limit key or a spent budget; a dispatcher that
dies mid-pass loses no run. Through the store, on both stores (at once on PostgreSQL)."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import func, select

from herder.control.dispatcher import Dispatcher
from herder.domain.placement.partitions import Partition
from herder.domain.states import AttemptState, RunState
from herder.store.runs import placing
from herder.store.schema import attempts, run_limit_keys, runs
from tests.integration.conftest import Api
from tests.integration.registered import register_worker
from tests.integration.test_budgets import set_budgets, used_cpu
from tests.integration.test_limits_placement import make_limit
from tests.integration.test_placers_race import with_quota
from tests.integration.test_pools import Tenant, make_pool

POOLS = ("p1", "p2")  # dealt with the shared fleet ("") over the partitions, in name order


def dispatchers(api: Api, count: int) -> list[Dispatcher]:
    """One per partition, each on a clock that leaps ahead at every look: every step a test
    takes is due, and full."""
    return [
        Dispatcher(
            api.store.placement,
            monotonic=itertools.count(0.0, 100.0).__next__,
            partition=Partition(number, count),
        )
        for number in range(count)
    ]


def pooled_job(api: Api, tenant: Tenant, pool: str | None, **spec: Any) -> str:
    body = {"name": f"work-{pool or 'shared'}", "runtime": "shell", "command": "true",
            "resources": {"cpu": 1, "memory_mb": 64}, **spec}  # fmt: skip
    if pool is not None:
        body["pool"] = pool
    response = api.http.post("/v1/jobs", headers=tenant.headers, json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def submit(api: Api, tenant: Tenant, job_id: str, count: int, **body: Any) -> list[str]:
    made = []
    for _ in range(count):
        response = api.http.post(f"/v1/jobs/{job_id}/runs", headers=tenant.headers, json=body)
        assert response.status_code == 201, response.text
        made.append(response.json()["id"])
    return made


def pooled_fleet(
    api: Api, *tenants: str, per_pool: int = 2, cpu: float = 8
) -> dict[str | None, list[str]]:
    """The pools, each with a share for each of ``tenants`` larger than the pool (so none
    borrows), and ``per_pool`` workers in each and in the shared fleet."""
    shares = [{"tenant_id": tenant, "cpu": 1000, "memory_mb": 10**6} for tenant in tenants]
    for name in POOLS:
        make_pool(api, name, selector={"pool": name}, shares=shares)
    fleet: dict[str | None, list[str]] = {}
    for pool in (None, *POOLS):
        labels = {} if pool is None else {"pool": pool}
        name = pool or "shared"
        fleet[pool] = [
            register_worker(api, f"{name}-{index}", cpu=cpu, memory_mb=8192, labels=labels)
            for index in range(per_pool)
        ]
    return fleet


def placed_on(api: Api) -> dict[str, str]:
    """Each running attempt's run → its worker."""
    with api.store.database.read() as connection:
        rows = connection.execute(
            select(attempts.c.run_id, attempts.c.worker_id).where(
                attempts.c.state == AttemptState.RUNNING
            )
        )
        return {run_id: worker_id for run_id, worker_id in rows}


def test_each_partition_places_only_its_pools_runs_on_its_pools_workers(api: Api) -> None:
    acme = Tenant(api, "acme")
    fleet = pooled_fleet(api, acme.id)
    made = {pool: submit(api, acme, pooled_job(api, acme, pool), 3) for pool in (None, *POOLS)}
    shared_and_p2, p1 = dispatchers(api, 2)  # dealt: "" → 0, p1 → 1, p2 → 0
    p1.step()
    assert set(placed_on(api)) == set(made["p1"])
    assert set(placed_on(api).values()) <= set(fleet["p1"])
    shared_and_p2.step()
    where = placed_on(api)
    assert set(where) == {run_id for runs_of in made.values() for run_id in runs_of}
    for pool, run_ids in made.items():
        assert {where[run_id] for run_id in run_ids} <= set(fleet[pool])


def test_a_run_naming_a_pool_that_does_not_exist_waits_in_the_shared_fleets_partition(
    api: Api,
) -> None:
    acme = Tenant(api, "acme")
    pooled_fleet(api, acme.id)
    (lost,) = submit(api, acme, pooled_job(api, acme, "p1"), 1)
    delete = api.http.delete("/v1/pools/p1", headers=api.admin)
    assert delete.status_code in (200, 204), delete.text
    shared, other = dispatchers(api, 2)
    other.step()
    untouched = reason_of(api, lost)
    assert untouched == "not looked at by the dispatcher yet"  # not its partition's
    shared.step()
    assert "pool p1" in (reason_of(api, lost) or "")


def reason_of(api: Api, run_id: str) -> str | None:
    with api.store.database.read() as connection:
        reason: str | None = connection.execute(
            select(runs.c.waiting_reason).where(runs.c.id == run_id)
        ).scalar_one()
    return reason


@pytest.mark.parametrize("count", [2, 3])
def test_partitions_side_by_side_never_over_fill_a_quota_a_key_or_a_worker(
    api: Api, count: int
) -> None:
    acme, globex = Tenant(api, "acme"), Tenant(api, "globex")
    with_quota(api, acme, max_cpu=9)
    make_limit(api, globex, "partner-api", max_running=4)
    fleet = pooled_fleet(
        api, acme.id, globex.id, per_pool=2, cpu=4
    )  # 24 cpus in all: less than the runs ask
    for pool in (None, *POOLS):
        submit(api, acme, pooled_job(api, acme, pool), 8)
        keyed = pooled_job(api, globex, pool, limits=[{"limit": "partner-api", "key": "one"}])
        submit(api, globex, keyed, 8)
        submit(api, globex, pooled_job(api, globex, pool, name=f"free-{pool}"), 8)
    placers = dispatchers(api, count)
    until_settled(api, placers)
    where = placed_on(api)
    tenants = tenants_of(api, where)
    assert Counter(tenants.values())[acme.id] <= 9  # its quota of 1-cpu runs
    assert keyed_running(api) <= 4
    per_worker = Counter(where.values())
    assert all(per_worker[worker] <= 4 for pool in fleet.values() for worker in pool)
    assert sum(per_worker.values()) == 24  # the fleet is full: nothing held back for nothing


def test_a_spent_budget_holds_its_runs_in_every_partition(api: Api) -> None:
    budgets = {"budgets": [{"period": "day", "cpu_seconds": 10}]}
    assert set_budgets(api, api.tenant_id, budgets).status_code == 200
    used_cpu(api, register_worker(api, "spender", cpu=1), 11)
    pooled_fleet(api, api.tenant_id)
    held = []
    for pool in (None, *POOLS):
        job = api.create_job(f"held-{pool}", **({} if pool is None else {"pool": pool}))
        held += [api.start_run(job["id"])["id"] for _ in range(2)]
    until_settled(api, dispatchers(api, 3))
    assert not set(held) & set(placed_on(api))
    assert all("budget is spent" in (reason_of(api, run_id) or "") for run_id in held)


def test_a_dispatcher_dying_mid_pass_loses_no_run_and_places_none_twice(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    acme = Tenant(api, "acme")
    pooled_fleet(api, acme.id)
    made = [
        run_id
        for pool in (None, *POOLS)
        for run_id in submit(api, acme, pooled_job(api, acme, pool), 4)
    ]
    insert = placing._insert_attempts
    died: list[bool] = []

    def dies_once(*arguments: Any) -> Any:
        inserted = insert(*arguments)  # the runs started and their attempts made, uncommitted
        if not died:
            died.append(True)
            raise RuntimeError("the dispatcher's process died here")
        return inserted

    monkeypatch.setattr(placing, "_insert_attempts", dies_once)
    first, *others = dispatchers(api, 3)
    with pytest.raises(RuntimeError):
        first.step()
    assert placed_on(api) == {}  # nothing of its pass was kept
    (again, *_) = dispatchers(api, 3)  # its successor, with its lease
    until_settled(api, [*others, again])
    assert set(placed_on(api)) == set(made)
    with api.store.database.read() as connection:
        counts = connection.execute(
            select(attempts.c.run_id, func.count()).group_by(attempts.c.run_id)
        ).all()
    assert all(count == 1 for _, count in counts)  # one attempt each: none placed twice


def until_settled(api: Api, placers: list[Dispatcher], rounds: int = 6) -> None:
    """Passes of every placer, side by side on PostgreSQL (one after the other on SQLite,
    which has one writer), until a round places nothing more."""
    at_once = api.store.database.is_postgres
    before = -1
    for _ in range(rounds):
        if at_once:
            threads = [threading.Thread(target=placer.step) for placer in placers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
        else:
            for placer in placers:
                placer.step()
        now = len(placed_on(api))
        if now == before:
            return
        before = now
    raise AssertionError(f"placement still moving after {rounds} rounds")


def tenants_of(api: Api, where: dict[str, str]) -> dict[str, str]:
    with api.store.database.read() as connection:
        rows = connection.execute(
            select(runs.c.id, runs.c.tenant_id).where(runs.c.id.in_(sorted(where)))
        )
        return {run_id: tenant_id for run_id, tenant_id in rows}


def keyed_running(api: Api) -> int:
    with api.store.database.read() as connection:
        running: int = connection.execute(
            select(func.count())
            .select_from(run_limit_keys.join(runs, runs.c.id == run_limit_keys.c.run_id))
            .where(runs.c.state == RunState.RUNNING)
        ).scalar_one()
    return running
