"""Debounce through the API on both stores: a key's submissions within the window answer
with one run, which waits (holding nothing) until the window after the last closes, never
past the maximum wait, with the last submission's values; a batch folds likewise; another
key or job makes its own run; once the window closes the dispatcher starts it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import update

from herder.store.schema import runs
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import register_worker

DEBOUNCE = {"window_seconds": 60, "keep": "last", "max_wait_seconds": 600}


def setup(api: Api, **debounce: Any) -> str:
    body = {"name": "rebuilds", "debounce": {**DEBOUNCE, **debounce}}
    made = api.http.post("/v1/limits", headers=api.admin, json=body)
    assert made.status_code == 201, made.text
    job = {"name": "rebuild", "runtime": "shell", "command": "true",
           "parameters": [{"name": "site"}, {"name": "edit", "default": "none"}],
           "limits": [{"limit": "rebuilds", "key": "{params.site}"}]}  # fmt: skip
    response = api.http.post("/v1/jobs", headers=api.admin, json=job)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def submit(api: Api, job_id: str, site: str, edit: str) -> dict[str, Any]:
    body = {"params": {"site": site, "edit": edit}}
    response = api.http.post(f"/v1/jobs/{job_id}/runs", headers=api.admin, json=body)
    assert response.status_code in (200, 201), response.text
    run: dict[str, Any] = response.json()
    return run


def run_of(api: Api, run_id: str) -> dict[str, Any]:
    response = api.http.get(f"/v1/runs/{run_id}", headers=api.admin)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def test_a_burst_of_submissions_is_one_run_with_the_last_values(api: Api) -> None:
    job_id = setup(api)
    before = datetime.now(UTC)
    first, second, third = (submit(api, job_id, "blog", edit) for edit in ("a", "b", "c"))
    assert first["id"] == second["id"] == third["id"]
    run = run_of(api, first["id"])
    assert run["spec"]["env"]["edit"] == "c"
    starts = datetime.fromisoformat(run["run_at"])
    assert before + timedelta(seconds=59) <= starts <= datetime.now(UTC) + timedelta(seconds=60)
    events = api.http.get(f"/v1/runs/{first['id']}/events", headers=api.admin).json()
    assert sum("joined it (debounce)" in event["message"] for event in events) == 2
    other = submit(api, job_id, "shop", "a")
    assert other["id"] != first["id"]


def test_the_run_waits_out_its_window_then_starts(api: Api) -> None:
    job_id = setup(api, keep="first")
    register_worker(api, "w1")
    run_id = submit(api, job_id, "blog", "a")["id"]
    submit(api, job_id, "blog", "b")
    dispatch(api.store)
    run = run_of(api, run_id)
    assert run["state"] == "queued"
    assert run["waiting_reason"].startswith("debounced: submissions with its key join it until")
    assert run["spec"]["env"]["edit"] == "a"  # the first's values
    with api.store.database.write() as connection:  # the window closes
        past = datetime.now(UTC) - timedelta(seconds=1)
        connection.execute(update(runs).where(runs.c.id == run_id).values(run_at=past))
    dispatch(api.store)
    assert run_of(api, run_id)["state"] == "running"
    assert submit(api, job_id, "blog", "c")["id"] != run_id  # a started run takes no more


def test_a_batch_folds_its_submissions_of_one_key(api: Api) -> None:
    job_id = setup(api)
    items = [{"job_id": job_id, "params": {"site": site, "edit": edit}}
             for site, edit in (("blog", "a"), ("shop", "a"), ("blog", "b"))]  # fmt: skip
    response = api.http.post("/v1/runs/batch", headers=api.admin, json={"runs": items})
    assert response.status_code in (200, 201, 207), response.text
    results = response.json()["items"]
    assert results[0]["run_id"] == results[2]["run_id"] != results[1]["run_id"]
    assert run_of(api, results[0]["run_id"])["spec"]["env"]["edit"] == "b"
