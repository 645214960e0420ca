"""POST /v1/runs/batch: many runs in one request, each answered on its own."""

from __future__ import annotations

import json
from typing import Any

import pytest

from herder.api.ratelimit import SubmitLimiter
from herder.client import ApiError, HerderClient
from herder.domain.models import Role
from tests.clocks import ManualClock
from tests.integration.conftest import Api, Herder


def batch(api: Api, runs: list[dict[str, Any]], key: str | None = None) -> Any:
    headers = api.admin if key is None else api.as_key(key)
    return api.http.post("/v1/runs/batch", headers=headers, json={"runs": runs})


def test_a_batch_queues_every_run_with_its_jobs_spec_and_overrides(api: Api) -> None:
    hello, other = api.create_job("hello"), api.create_job("other", env={"A": "1"})
    response = batch(
        api,
        [
            {"job_id": hello["id"]},
            {"job_id": other["id"], "env": {"B": "2"}, "args": ["x"]},
            {"job_id": hello["id"]},
        ],
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["created"] == 3
    assert [item["status"] for item in result["items"]] == [201, 201, 201]
    ids = [item["run_id"] for item in result["items"]]
    assert len(set(ids)) == 3
    runs = [api.http.get(f"/v1/runs/{run_id}", headers=api.admin).json() for run_id in ids]
    assert [run["job_name"] for run in runs] == ["hello", "other", "hello"]
    assert {run["state"] for run in runs} == {"queued"}
    assert runs[1]["spec"]["env"] == {"A": "1", "B": "2"}
    assert runs[1]["spec"]["args"] == ["x"]
    events = api.http.get(f"/v1/runs/{ids[0]}/events", headers=api.admin).json()
    assert [event["message"] for event in events] == ["submitted"]


def test_an_unknown_or_foreign_job_is_refused_alone(api: Api) -> None:
    job = api.create_job()
    foreign_key = api.other_tenant_key()
    foreign_job = api.http.post(
        "/v1/jobs",
        headers=api.as_key(foreign_key),
        json={"name": "theirs", "runtime": "shell", "command": "true"},
    ).json()
    response = batch(
        api, [{"job_id": job["id"]}, {"job_id": foreign_job["id"]}, {"job_id": "job_nope"}]
    )
    assert response.status_code == 200, response.text
    items = response.json()["items"]
    assert items[0]["status"] == 201
    for index in (1, 2):
        assert items[index]["status"] == 404
        assert items[index]["run_id"] is None
        assert items[index]["field"] == f"runs.{index}.job_id"
        assert "not found" in items[index]["detail"]
    assert response.json()["created"] == 1
    # The other tenant sees nothing of it.
    theirs = api.http.get("/v1/runs", headers=api.as_key(foreign_key)).json()
    assert theirs["items"] == []


def test_idempotency_keys_repeat_within_a_batch_and_across_batches(api: Api) -> None:
    job, other = api.create_job(), api.create_job("other")
    first = batch(
        api,
        [
            {"job_id": job["id"], "idempotency_key": "a"},
            {"job_id": job["id"], "idempotency_key": "a"},
            {"job_id": other["id"], "idempotency_key": "a"},
        ],
    ).json()
    assert [item["status"] for item in first["items"]] == [201, 200, 409]
    assert first["items"][1]["run_id"] == first["items"][0]["run_id"]
    assert first["items"][2]["field"] == "runs.2.idempotency_key"
    again = batch(api, [{"job_id": job["id"], "idempotency_key": "a"}]).json()
    assert again["items"][0] == {**first["items"][1], "status": 200}
    assert again["created"] == 0
    # The single submit sees the same key.
    single = api.http.post(
        f"/v1/jobs/{job['id']}/runs", headers={**api.admin, "Idempotency-Key": "a"}
    )
    assert single.status_code == 200
    assert single.json()["id"] == first["items"][0]["run_id"]


def test_a_malformed_batch_is_422_naming_the_run_and_field(api: Api) -> None:
    job = api.create_job()
    cases = [
        ({"runs": []}, "runs"),
        ({"runs": [{"job_id": job["id"]}] * 1001}, "runs"),
        ({"runs": [{"job_id": job["id"]}, {"job_id": job["id"], "cpu": 3}]}, "runs.1.cpu"),
        ({"runs": [{"job_id": job["id"], "env": {"A": 1}}]}, "runs.0.env.A"),
        ({"runs": [{"job_id": ""}]}, "runs.0.job_id"),
        ({"runs": [{"job_id": job["id"], "idempotency_key": "k" * 256}]}, "runs.0.idempotency_key"),
        ({"jobs": []}, "runs"),
    ]
    for body, field in cases:
        response = api.http.post("/v1/runs/batch", headers=api.admin, json=body)
        assert response.status_code == 422, (body, response.text)
        fields = [error["field"] for error in response.json()["errors"]]
        assert any(name.startswith(field) for name in fields), (field, fields)
    assert api.http.get("/v1/runs", headers=api.admin).json()["items"] == []


def test_a_viewer_cannot_submit_a_batch(api: Api) -> None:
    job = api.create_job()
    viewer = api.store.access.create_api_key(api.tenant_id, Role.VIEWER, "v")[1]
    assert batch(api, [{"job_id": job["id"]}], key=viewer).status_code == 403


def test_a_batch_takes_one_submission_per_run_from_the_rate_quota(api: Api) -> None:
    clock = ManualClock()
    api.http.app.state.submit_limiter = SubmitLimiter(  # type: ignore[attr-defined]
        api.store.submit_buckets, api.store.access.tenant_quotas, clock=clock
    )
    job = api.create_job()
    api.http.patch(
        f"/v1/tenants/{api.tenant_id}",
        headers=api.admin,
        json={"quotas": {"submit_rate_per_second": 10, "submit_burst": 5}},
    )
    assert batch(api, [{"job_id": job["id"]}] * 3).json()["created"] == 3
    refused = batch(api, [{"job_id": job["id"]}] * 3)  # 2 tokens left: all or none
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    too_big = batch(api, [{"job_id": job["id"]}] * 6)  # more than a burst: waiting won't do
    assert too_big.status_code == 422
    assert too_big.json()["field"] == "runs"
    assert "at most 5 per batch" in too_big.json()["detail"]
    clock.advance(0.1)
    assert batch(api, [{"job_id": job["id"]}] * 3).json()["created"] == 3
    listed = api.http.get("/v1/runs", headers=api.admin, params={"job_id": job["id"]}).json()
    assert len(listed["items"]) == 6


def test_the_client_starts_many_runs_in_batches_of_a_thousand(api: Api) -> None:
    job = api.create_job()
    with HerderClient("http://testserver", api.admin_key, http=api.http) as client:
        run_ids = client.start_runs(str(job["id"]), 1001, env={"N": "1"})
        assert len(set(run_ids)) == 1001
        assert client.get_run(run_ids[-1]).spec.env == {"N": "1"}
        with pytest.raises(ApiError, match="job job_nope not found") as refused:
            client.start_runs("job_nope", 2)
    assert refused.value.status == 404


def test_herder_run_start_count_starts_that_many(api: Api, herder: Herder) -> None:
    api.create_job("hello")
    started = herder("run", "start", "hello", "--count", "3", "--json")
    assert started.exit_code == 0, started.output
    run_ids = json.loads(started.output)
    assert len(run_ids) == 3
    listed = api.http.get("/v1/runs", headers=api.admin).json()["items"]
    assert sorted(run["id"] for run in listed) == sorted(run_ids)
    keyed = herder("run", "start", "hello", "--count", "2", "--idempotency-key", "k")
    assert keyed.exit_code != 0
    assert "one key names one run" in keyed.output
