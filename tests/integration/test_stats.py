"""/v1/stats: the overview's numbers, counted by the database — a tenant's own, or the
fleet's for a system admin."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import update

from herder.store.schema import runs
from tests.integration.conftest import Api
from tests.integration.registered import register_worker
from tests.integration.test_worker_protocol import claim, completion, report


def stats(api: Api, headers: dict[str, str], **params: Any) -> dict[str, Any]:
    response = api.http.get("/v1/stats", headers=headers, params=params)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def end_runs(api: Api, outcomes: list[str]) -> list[str]:
    """Runs of a job of the admin's tenant, each ended by a worker with the given outcome."""
    job = api.create_job("counted")
    for _ in outcomes:
        api.start_run(job["id"])
    worker_id = register_worker(api, cpu=len(outcomes) * 2)
    assignments = claim(api, worker_id)["assignments"]
    assert len(assignments) == len(outcomes)
    for assignment, outcome in zip(assignments, outcomes, strict=True):
        report(
            api,
            worker_id,
            completions=[completion(assignment, outcome, int(outcome != "succeeded"))],
        )
    return [assignment["run_id"] for assignment in assignments]


def test_the_fleet_sees_runs_ended_per_minute_and_its_failure_rate(api: Api) -> None:
    end_runs(api, ["succeeded", "succeeded", "failed"])
    api.start_run(api.create_job("waiting", resources={"cpu": 64})["id"])
    overview = stats(api, api.admin)
    assert overview["scope"] == "fleet"
    assert len(overview["throughput"]) == 60
    assert sum(m["succeeded"] for m in overview["throughput"]) == 2
    assert sum(m["failed"] for m in overview["throughput"]) == 1
    assert overview["ended"] == {"succeeded": 2, "failed": 1, "cancelled": 0}
    assert overview["failure_rate"] == 1 / 3
    assert overview["runs"]["queued"] == 1
    assert overview["workers"]["alive"] == 1
    assert overview["resources"]["capacity"]["cpu"] == 6
    assert overview["resources"]["used"]["slots"] == 0


def test_a_tenant_sees_only_its_own_runs_and_nothing_of_the_fleet(api: Api) -> None:
    end_runs(api, ["succeeded", "failed"])
    other = api.as_key(api.other_tenant_key())
    overview = stats(api, other)
    assert overview["scope"] == "tenant"
    assert overview["ended"] == {"succeeded": 0, "failed": 0, "cancelled": 0}
    assert overview["failure_rate"] is None
    assert overview["resources"]["capacity"] is None
    assert overview["workers"] is None


def test_a_tenant_sees_its_running_runs_resources(api: Api) -> None:
    key = api.other_tenant_key()
    job = api.http.post(
        "/v1/jobs", headers=api.as_key(key),
        json={"name": "big", "runtime": "shell", "command": "true",
              "resources": {"cpu": 1.5, "memory_mb": 300}},
    ).json()  # fmt: skip
    api.http.post(f"/v1/jobs/{job['id']}/runs", headers=api.as_key(key), json={})
    claim(api, register_worker(api, cpu=4))
    overview = stats(api, api.as_key(key))
    assert overview["runs"]["running"] == 1
    assert overview["resources"]["used"] == {"cpu": 1.5, "memory_mb": 300, "gpus": 0, "slots": 1}


def test_runs_ended_before_the_window_are_not_counted(api: Api) -> None:
    old, recent = end_runs(api, ["failed", "succeeded"])
    with api.store.database.write() as connection:
        connection.execute(
            update(runs).where(runs.c.id == old)
            .values(finished_at=api.store.clock.now() - timedelta(minutes=90))
        )  # fmt: skip
    assert stats(api, api.admin)["ended"] == {"succeeded": 1, "failed": 0, "cancelled": 0}
    assert stats(api, api.admin, minutes=120)["ended"]["failed"] == 1
    assert len(stats(api, api.admin, minutes=1)["throughput"]) == 1
    del recent


def test_the_window_is_bounded_and_the_caller_signed_in(api: Api) -> None:
    for minutes in (0, 1441, "hour"):
        response = api.http.get("/v1/stats", headers=api.admin, params={"minutes": minutes})
        assert response.status_code == 422
        assert "minutes" in response.text
    assert api.http.get("/v1/stats").status_code == 401
