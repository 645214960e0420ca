"""Pools in the dispatcher, through the store on both stores: runs go to their pool's
workers; past its nominal share a tenant's preemptible runs borrow idle room and are stored
as borrowed; a tenant below its share takes it back by preempting borrowed work only; a run
whose pool is deleted waits, saying why."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from herder.store.schema import attempts
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import register_worker
from tests.integration.test_placement import heartbeat
from tests.integration.test_pools import Tenant
from tests.integration.test_worker_protocol import claim


def gpu_job(api: Api, tenant: Tenant) -> str:
    body = {"name": "train", "runtime": "shell", "command": "true", "pool": "a100",
            "preemptible": True, "resources": {"cpu": 1, "memory_mb": 256, "gpus": 1}}  # fmt: skip
    response = api.http.post("/v1/jobs", headers=tenant.headers, json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def start(api: Api, tenant: Tenant, job_id: str, count: int = 1) -> list[str]:
    started = []
    for _ in range(count):
        response = api.http.post(f"/v1/jobs/{job_id}/runs", headers=tenant.headers, json={})
        assert response.status_code == 201, response.text
        started.append(response.json()["id"])
    return started


def run_of(api: Api, tenant: Tenant, run_id: str) -> dict[str, Any]:
    response = api.http.get(f"/v1/runs/{run_id}", headers=tenant.headers)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def borrowed_runs(api: Api) -> set[str]:
    with api.store.database.read() as connection:
        rows = connection.execute(select(attempts.c.run_id).where(attempts.c.borrowed.is_(True)))
        return set(rows.scalars())


def test_a_tenant_below_its_share_reclaims_it_from_borrowed_work_only(api: Api) -> None:
    ml, web = Tenant(api, "ml"), Tenant(api, "web")
    shares = [{"tenant_id": ml.id, "gpus": 2}, {"tenant_id": web.id, "gpus": 2}]
    made = api.http.post("/v1/pools", headers=api.admin, json={"name": "a100", "shares": shares})
    assert made.status_code == 201, made.text
    gpus = {"cpu": 8, "memory_mb": 8192, "gpus": 4}
    box = register_worker(api, "a100-box", labels={"pool": "a100"}, capacity=gpus)
    register_worker(api, "shared-box", capacity=gpus)  # no pool: never used for these

    web_runs = start(api, web, gpu_job(api, web), 4)
    assignments: list[dict[str, Any]] = claim(api, box)["assignments"]
    assert sorted(a["run_id"] for a in assignments) == sorted(web_runs)  # idle: all borrowable
    assert len(borrowed_runs(api)) == 2  # two within web's share, two past it

    (ml_run,) = start(api, ml, gpu_job(api, ml))
    dispatch(api.store)
    waiting = run_of(api, ml, ml_run)["waiting_reason"]
    assert "reclaiming its share in pool a100: preempting 1 borrowed run" in waiting
    (stopping,) = heartbeat(api, box, *assignments)["preempt"]
    by_attempt = {a["attempt_id"]: a["run_id"] for a in assignments}
    assert by_attempt[stopping] in borrowed_runs(api)  # never one within web's share


def test_a_pool_shows_what_each_tenant_runs_in_it_and_how_much_borrows(api: Api) -> None:
    ml, web = Tenant(api, "ml"), Tenant(api, "web")
    shares = [{"tenant_id": ml.id, "gpus": 2}, {"tenant_id": web.id, "gpus": 1}]
    made = api.http.post("/v1/pools", headers=api.admin, json={"name": "a100", "shares": shares})
    assert made.status_code == 201, made.text
    box = register_worker(api, "a100-box", labels={"pool": "a100"},
                          capacity={"cpu": 8, "memory_mb": 8192, "gpus": 4})  # fmt: skip
    start(api, web, gpu_job(api, web), 3)
    start(api, ml, gpu_job(api, ml))
    assert len(claim(api, box)["assignments"]) == 4
    listed = api.http.get("/v1/pools", headers=api.admin).json()["items"]
    assert listed[0]["in_use"] == [
        {"tenant_id": tenant.id, "attempts": count, "borrowed": borrowed,
         "cpu": float(count), "memory_mb": 256 * count, "gpus": count}
        for tenant, count, borrowed in sorted([(ml, 1, 0), (web, 3, 2)], key=lambda t: t[0].id)
    ]  # fmt: skip
    (seen,) = api.http.get("/v1/pools", headers=web.headers).json()["items"]
    assert [use["tenant_id"] for use in seen["in_use"]] == [web.id]  # its own only


def test_a_run_whose_pool_is_deleted_waits_saying_so(api: Api) -> None:
    ml = Tenant(api, "ml")
    made = api.http.post(
        "/v1/pools", headers=api.admin, json={"name": "a100", "shares": [{"tenant_id": ml.id}]}
    )
    assert made.status_code == 201, made.text
    job_id = gpu_job(api, ml)
    assert api.http.delete("/v1/pools/a100", headers=api.admin).status_code == 204
    (waiting,) = start(api, ml, job_id)
    register_worker(api, "box", labels={"pool": "a100"})
    dispatch(api.store)
    found = run_of(api, ml, waiting)
    assert found["state"] == "queued"
    assert "pool a100 does not exist" in found["waiting_reason"]
