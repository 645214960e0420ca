"""What a submission to a full key does, by its limit's strategy (docs/flow-control.md):
``cancel_newest`` records the new run cancelled, ``drop`` makes none (409, a batch's item
alone), ``cancel_in_progress`` cancels the key's oldest active runs (a running one is asked
to stop through its worker), ``queue`` leaves the waiting to the dispatcher. Other keys and
other limits are untouched."""

from __future__ import annotations

from typing import Any

from httpx import Response

from tests.integration.conftest import Api
from tests.integration.registered import register_worker
from tests.integration.test_worker_protocol import claim


def setup(api: Api, strategy: str, max_running: int = 1) -> str:
    limit = {"name": "per-account", "max_running": max_running, "strategy": strategy}
    assert api.http.post("/v1/limits", headers=api.admin, json=limit).status_code == 201
    job = {
        "name": "sync", "runtime": "shell", "command": "true",
        "parameters": [{"name": "account"}],
        "limits": [{"limit": "per-account", "key": "{params.account}"}],
    }  # fmt: skip
    response = api.http.post("/v1/jobs", headers=api.admin, json=job)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def submit(api: Api, job_id: str, account: str) -> Response:
    response: Response = api.http.post(
        f"/v1/jobs/{job_id}/runs", headers=api.admin, json={"params": {"account": account}}
    )
    return response


def state(api: Api, run_id: str) -> Any:
    return api.http.get(f"/v1/runs/{run_id}", headers=api.admin).json()["state"]


def test_cancel_newest_records_the_new_run_cancelled_naming_limit_and_key(api: Api) -> None:
    job_id = setup(api, "cancel_newest")
    first = submit(api, job_id, "acme").json()
    second = submit(api, job_id, "acme")
    assert second.status_code == 201, second.text
    assert second.json()["state"] == "cancelled"
    assert "limit per-account, key acme: 1 of 1 active" in second.json()["reason"]
    assert state(api, second.json()["id"]) == "cancelled"
    assert state(api, first["id"]) == "queued"
    assert submit(api, job_id, "globex").json()["state"] == "queued"


def test_drop_makes_no_run_and_answers_409_naming_limit_and_key(api: Api) -> None:
    job_id = setup(api, "drop", max_running=2)
    assert submit(api, job_id, "acme").status_code == 201
    assert submit(api, job_id, "acme").status_code == 201
    dropped = submit(api, job_id, "acme")
    assert dropped.status_code == 409, dropped.text
    assert "limit per-account, key acme: 2 of 2 active" in dropped.json()["detail"]
    listed = api.http.get(f"/v1/runs?job_id={job_id}", headers=api.admin).json()["items"]
    assert len(listed) == 2
    runs = [{"job_id": job_id, "params": {"account": account}} for account in ("x", "x", "acme")]
    batch = api.http.post("/v1/runs/batch", headers=api.admin, json={"runs": runs})
    assert batch.status_code == 200, batch.text
    assert [item["status"] for item in batch.json()["items"]] == [201, 201, 409]


def test_cancel_in_progress_cancels_the_keys_oldest_runs_for_the_new_one(api: Api) -> None:
    job_id = setup(api, "cancel_in_progress")
    worker_id = register_worker(api)
    oldest = submit(api, job_id, "acme").json()["id"]
    [assignment] = claim(api, worker_id)["assignments"]
    assert assignment["run_id"] == oldest
    newer = submit(api, job_id, "acme")
    assert newer.status_code == 201, newer.text
    assert newer.json()["state"] == "queued"
    assert api.http.get(f"/v1/runs/{oldest}", headers=api.admin).json()["cancel_requested"]
    newest = submit(api, job_id, "acme").json()["id"]
    assert state(api, newer.json()["id"]) == "cancelled"
    assert state(api, newest) == "queued"
    other = submit(api, job_id, "globex").json()["id"]
    assert state(api, other) == "queued"


def test_queue_leaves_every_submission_queued(api: Api) -> None:
    job_id = setup(api, "queue")
    assert [submit(api, job_id, "acme").json()["state"] for _ in range(3)] == ["queued"] * 3


def test_a_repeated_idempotency_key_answers_its_run_and_cancels_nothing(api: Api) -> None:
    job_id = setup(api, "cancel_in_progress")
    body = {"params": {"account": "acme"}}
    key = {"Idempotency-Key": "once"}
    first = api.http.post(f"/v1/jobs/{job_id}/runs", headers={**api.admin, **key}, json=body)
    assert first.status_code == 201, first.text
    again = api.http.post(f"/v1/jobs/{job_id}/runs", headers={**api.admin, **key}, json=body)
    assert again.status_code == 200, again.text
    assert again.json()["id"] == first.json()["id"]
    assert state(api, first.json()["id"]) == "queued"
