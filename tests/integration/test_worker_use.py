"""The fleet listing says what each worker's running attempts hold (the dashboard's workers
page shows it beside the worker's capacity)."""

from __future__ import annotations

from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import as_worker, register_worker


def test_each_worker_lists_the_slots_and_resources_its_running_attempts_hold(api: Api) -> None:
    job = api.create_job("hello", resources={"cpu": 0.5, "memory_mb": 300})
    for _ in range(2):
        api.start_run(job["id"])
    busy = register_worker(api, "busy", cpu=1, memory_mb=1024)
    dispatch(api.store)
    idle = register_worker(api, "idle")
    claimed = api.http.post(
        f"/v1/workers/{busy}/claim", headers=as_worker(busy),
        json={"max_runs": 10, "wait_seconds": 0},
    )  # fmt: skip
    assert len(claimed.json()["assignments"]) == 2

    listed = api.http.get("/v1/workers", headers=api.admin)
    assert listed.status_code == 200
    in_use = {worker["id"]: worker["in_use"] for worker in listed.json()}
    assert in_use == {
        busy: {"slots": 2, "cpu": 1.0, "memory_mb": 600, "gpus": 0},
        idle: {"slots": 0, "cpu": 0.0, "memory_mb": 0, "gpus": 0},
    }
