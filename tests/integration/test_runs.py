"""One-off runs: submit (idempotently), list, read, cancel."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from tests.integration.conftest import Api


def test_a_run_is_queued_with_the_jobs_spec_and_overrides(api: Api) -> None:
    job = api.create_job(args=["a"], env={"A": "1", "B": "2"})
    run = api.start_run(job["id"], args=["x", "y"], env={"B": "3"})
    assert run["state"] == "queued"
    assert run["spec"]["args"] == ["x", "y"]
    assert run["spec"]["env"] == {"A": "1", "B": "3"}
    detail = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()
    assert detail["attempts"] == []
    assert [event["to_state"] for event in detail["events"]] == ["queued"]


def test_the_same_idempotency_key_returns_the_same_run(api: Api) -> None:
    job = api.create_job()
    headers = {**api.admin, "Idempotency-Key": "order-42"}
    first = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=headers)
    second = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=headers)
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"]


def test_concurrent_requests_with_one_key_make_one_run(api: Api) -> None:
    job = api.create_job()
    headers = {**api.admin, "Idempotency-Key": "burst"}

    def submit(_: int) -> str:
        response = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=headers)
        assert response.status_code in (200, 201), response.text
        run_id: str = response.json()["id"]
        return run_id

    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(submit, range(24)))
    assert len(ids) == 1
    assert len(api.http.get("/v1/runs", headers=api.admin).json()["items"]) == 1


def test_a_key_reused_for_another_job_is_a_conflict(api: Api) -> None:
    first, second = api.create_job("one"), api.create_job("two")
    headers = {**api.admin, "Idempotency-Key": "k"}
    api.http.post(f"/v1/jobs/{first['id']}/runs", headers=headers)
    response = api.http.post(f"/v1/jobs/{second['id']}/runs", headers=headers)
    assert response.status_code == 409


def test_runs_list_by_job_state_and_time_window(api: Api) -> None:
    one, two = api.create_job("one"), api.create_job("two")
    a = api.start_run(one["id"])
    b = api.start_run(two["id"])
    c = api.start_run(two["id"])
    api.http.post(f"/v1/runs/{c['id']}/cancel", headers=api.admin)

    def ids(**params: object) -> list[object]:
        response = api.http.get("/v1/runs", headers=api.admin, params=params)
        assert response.status_code == 200, response.text
        return [run["id"] for run in response.json()["items"]]

    assert ids() == [c["id"], b["id"], a["id"]]
    assert ids(job_id=two["id"]) == [c["id"], b["id"]]
    assert ids(state="cancelled") == [c["id"]]
    assert ids(state=["queued", "cancelled"], job_id=two["id"]) == [c["id"], b["id"]]
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    earlier = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert ids(since=later) == []
    assert ids(since=earlier, until=later) == [c["id"], b["id"], a["id"]]
    first_page = api.http.get("/v1/runs", headers=api.admin, params={"limit": 2}).json()
    rest = ids(cursor=first_page["next_cursor"])
    assert rest == [a["id"]]
    assert api.http.get("/v1/runs", headers=api.admin, params={"state": "nap"}).status_code == 422
    naive = api.http.get("/v1/runs", headers=api.admin, params={"since": "2026-01-01T00:00:00"})
    assert naive.status_code == 422
    assert "timezone" in naive.json()["detail"]


def test_cancelling_a_queued_run_ends_it_and_a_second_cancel_conflicts(api: Api) -> None:
    run = api.start_run(api.create_job()["id"])
    cancelled = api.http.post(f"/v1/runs/{run['id']}/cancel", headers=api.admin)
    assert cancelled.status_code == 200
    assert cancelled.json()["state"] == "cancelled"
    again = api.http.post(f"/v1/runs/{run['id']}/cancel", headers=api.admin)
    assert again.status_code == 409
    assert "already cancelled" in again.json()["detail"]


def test_a_missing_run_or_job_is_404(api: Api) -> None:
    assert api.http.get("/v1/runs/run_nope", headers=api.admin).status_code == 404
    assert api.http.post("/v1/jobs/job_nope/runs", headers=api.admin).status_code == 404
    cursor = api.http.get("/v1/runs", headers=api.admin, params={"cursor": "!!"})
    assert cursor.status_code == 422
