"""A pool's autoscaling through the API (docs/autoscaling.md): the count it should have for
what runs and waits in it, its bounds, the gauge an HPA or KEDA scales on; its policy refused
with a 422 naming the field when it cannot hold."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Api
from tests.integration.registered import register_worker
from tests.integration.test_worker_protocol import claim

POLICY = {
    "worker": {"cpu": 2, "memory_mb": 2048, "slots": 4},
    "min_workers": 1,
    "max_workers": 5,
    "lead_seconds": 60,
}


def pool_with_autoscaling(api: Api, name: str = "cpu", **autoscaling: Any) -> None:
    body = {
        "name": name,
        "shares": [{"tenant_id": api.tenant_id, "cpu": 4}],
        "autoscaling": {**POLICY, **autoscaling},
    }
    response = api.http.post("/v1/pools", headers=api.admin, json=body)
    assert response.status_code == 201, response.text


def autoscaling(api: Api, pool: str = "cpu") -> dict[str, Any]:
    response = api.http.get(f"/v1/pools/{pool}/autoscaling", headers=api.admin)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_an_idle_pool_asks_for_its_minimum(api: Api) -> None:
    pool_with_autoscaling(api)
    idle = autoscaling(api)
    assert (idle["desired_workers"], idle["workers"]) == (1, [])
    assert idle["queued"] == {"cpu": 0, "memory_mb": 0, "gpus": 0, "runs": 0}


def test_what_runs_and_waits_in_the_pool_sets_the_count_and_nothing_else_does(api: Api) -> None:
    pool_with_autoscaling(api)
    job = api.create_job("work", pool="cpu", resources={"cpu": 1, "memory_mb": 256})
    for _ in range(6):
        api.start_run(job["id"])
    elsewhere = api.create_job("elsewhere", resources={"cpu": 8, "memory_mb": 256})
    api.start_run(elsewhere["id"])  # the shared fleet's: not this pool's demand
    waiting = autoscaling(api)
    assert waiting["queued"] == {"cpu": 6, "memory_mb": 1536, "gpus": 0, "runs": 6}
    assert waiting["desired_workers"] == 3  # 6 cores of 2-core workers

    worker = register_worker(api, "pooled", cpu=2, labels={"pool": "cpu"})
    assert len(claim(api, worker)["assignments"]) == 2
    busy = autoscaling(api)
    assert busy["running"]["runs"] == 2
    assert busy["queued"]["runs"] == 4
    assert busy["workers"] == [{"id": worker, "running": 2, "draining": False}]
    assert busy["desired_workers"] == 3

    metrics = api.http.get("/metrics", headers=api.admin).text
    assert 'herder_pool_desired_workers{pool="cpu"} 3.0' in metrics


def test_the_count_stays_within_the_pools_bounds(api: Api) -> None:
    pool_with_autoscaling(api, max_workers=2)
    job = api.create_job("work", pool="cpu", resources={"cpu": 2, "memory_mb": 256})
    for _ in range(10):
        api.start_run(job["id"])
    assert autoscaling(api)["desired_workers"] == 2


def test_a_pool_without_autoscaling_has_none_to_read(api: Api) -> None:
    pool_with_autoscaling(api)
    changed = api.http.patch("/v1/pools/cpu", headers=api.admin, json={"autoscaling": None})
    assert changed.json()["autoscaling"] is None
    response = api.http.get("/v1/pools/cpu/autoscaling", headers=api.admin)
    assert response.status_code == 404
    assert "no autoscaling" in response.json()["detail"]
    assert "herder_pool_desired_workers{" not in api.http.get("/metrics", headers=api.admin).text


@pytest.mark.parametrize(
    ("autoscaling", "field"),
    [
        ({"min_workers": 6, "max_workers": 5}, "autoscaling"),
        ({"max_workers": -1}, "autoscaling.max_workers"),
        ({"max_workers": 10**9}, "autoscaling.max_workers"),
        ({"lead_seconds": "soon"}, "autoscaling.lead_seconds"),
        ({"worker": {"cpu": -2, "memory_mb": 2048}}, "autoscaling.worker.cpu"),
        ({"worker": {"cpu": "NaN", "memory_mb": 2048}}, "autoscaling.worker.cpu"),
        ({"worker": {"cpu": 2, "memory_mb": 2048, "slots": 0}}, "autoscaling.worker.slots"),
        ({"worker": None}, "autoscaling.worker"),
    ],
)
def test_a_policy_that_cannot_hold_is_a_422_naming_its_field(
    api: Api, autoscaling: dict[str, Any], field: str
) -> None:
    body = {"name": "cpu", "autoscaling": {**POLICY, **autoscaling}}
    response = api.http.post("/v1/pools", headers=api.admin, json=body)
    assert response.status_code == 422, response.text
    assert field in [error["field"] for error in response.json()["errors"]]
