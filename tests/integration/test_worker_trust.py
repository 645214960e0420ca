"""A registered worker is bound by the secret its registration answered with: the fleet's
worker token (which a job might once have seen) or another worker's secret cannot act for
it. And one unreadable stored run cannot poison a claim batch."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, update

from herder.store.access import hash_secret
from herder.store.schema import attempts, runs, workers
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import as_worker, register_worker
from tests.integration.test_worker_protocol import claim, completion


def _calls(worker_id: str, attempt: dict[str, Any], artifact: str) -> list[tuple[str, Any]]:
    """Every call a registered worker makes: (path, JSON body, or None for a GET)."""
    running = [{"attempt_id": attempt["attempt_id"], "attempt": attempt["attempt"]}]
    return [
        (f"/v1/workers/{worker_id}/heartbeat", {"running": running}),
        (f"/v1/workers/{worker_id}/claim", {"max_runs": 1, "wait_seconds": 0}),
        (f"/v1/workers/{worker_id}/reports", {"completions": [completion(attempt)]}),
        (
            f"/v1/attempts/{attempt['attempt_id']}/complete",
            {"worker_id": worker_id, "completion": completion(attempt)},
        ),
        (f"/v1/workers/{worker_id}/artifacts/{artifact}", None),
    ]


@pytest.fixture
def claimed(api: Api) -> tuple[str, dict[str, Any], str]:
    """A registered worker running an attempt of a python job (so it may fetch its artifact)."""
    worker_id = register_worker(api)
    artifact = api.http.post(
        "/v1/artifacts", headers=api.admin, files={"file": ("a.py", b"print(1)\n")}
    ).json()["id"]
    api.start_run(api.create_job("py", runtime="python", command=None, artifact=artifact)["id"])
    (attempt,) = claim(api, worker_id)["assignments"]
    return worker_id, attempt, artifact


def _call(api: Api, path: str, body: Any, headers: dict[str, str]) -> int:
    if body is None:
        status: int = api.http.get(path, headers=headers).status_code
    else:
        status = api.http.post(path, headers=headers, json=body).status_code
    return status


def test_the_fleet_token_alone_cannot_act_for_a_registered_worker(
    api: Api, claimed: tuple[str, dict[str, Any], str]
) -> None:
    worker_id, attempt, artifact = claimed
    for path, body in _calls(worker_id, attempt, artifact):
        assert _call(api, path, body, api.worker) == 401, path
    run = api.http.get(f"/v1/runs/{attempt['run_id']}", headers=api.admin).json()
    assert run["state"] == "running"  # no forged success went through


def test_another_workers_secret_cannot_act_for_it(
    api: Api, claimed: tuple[str, dict[str, Any], str]
) -> None:
    worker_id, attempt, artifact = claimed
    intruder = register_worker(api, "intruder")
    for path, body in _calls(worker_id, attempt, artifact):
        assert _call(api, path, body, as_worker(intruder)) == 401, path
    # its own secret still works, for the same calls
    assert _call(api, *_calls(worker_id, attempt, artifact)[0], as_worker(worker_id)) == 200
    assert _call(api, *_calls(worker_id, attempt, artifact)[-1], as_worker(worker_id)) == 200


def test_a_secret_is_long_random_shown_once_and_stored_as_a_hash(api: Api) -> None:
    first, second = register_worker(api), register_worker(api)
    secrets = [as_worker(first)["Authorization"][7:], as_worker(second)["Authorization"][7:]]
    assert secrets[0] != secrets[1]
    assert all(secret.startswith("wks_") and len(secret) >= 4 + 43 for secret in secrets)
    with api.store.database.read() as connection:
        stored = connection.execute(
            select(workers.c.secret_hash).where(workers.c.id == first)
        ).scalar()
    assert stored == hash_secret(secrets[0])
    listed = api.http.get("/v1/workers", headers=api.admin).text
    assert secrets[0] not in listed
    assert stored not in listed


def test_a_worker_secret_is_no_api_key_and_no_worker_token(api: Api) -> None:
    worker_id = register_worker(api)
    assert api.http.get("/v1/jobs", headers=as_worker(worker_id)).status_code == 403
    body = {"name": "w", "capacity": {"cpu": 1, "memory_mb": 64}, "max_slots": 1}
    assert api.http.post("/v1/workers", headers=as_worker(worker_id), json=body).status_code == 401


def test_registering_again_after_being_lost_gives_a_new_secret(api: Api) -> None:
    worker_id = register_worker(api)
    with api.store.database.write() as connection:
        connection.execute(update(workers).where(workers.c.id == worker_id).values(state="lost"))
    url = f"/v1/workers/{worker_id}/heartbeat"
    assert api.http.post(url, headers=as_worker(worker_id), json={}).status_code == 410
    again = register_worker(api)
    assert again != worker_id
    assert as_worker(again) != as_worker(worker_id)
    assert api.http.post(url, headers=as_worker(again), json={}).status_code == 401


def test_a_broken_stored_run_fails_alone_and_the_rest_of_the_claim_is_handed_over(
    api: Api,
) -> None:
    worker_id = register_worker(api, cpu=8, memory_mb=8192)
    other_key = api.other_tenant_key("other")
    other_job = api.http.post(
        "/v1/jobs",
        headers=api.as_key(other_key),
        json={"name": "theirs", "runtime": "shell", "command": "echo theirs"},
    ).json()
    theirs = api.http.post(f"/v1/jobs/{other_job['id']}/runs", headers=api.as_key(other_key))
    good = api.start_run(api.create_job("good")["id"])
    broken = api.start_run(api.create_job("broken")["id"])
    dispatch(api.store)
    with api.store.database.write() as connection:  # what oversized overrides once stored
        spec = connection.execute(select(runs.c.spec).where(runs.c.id == broken["id"])).scalar_one()
        connection.execute(
            update(runs)
            .where(runs.c.id == broken["id"])
            .values(spec={**spec, "args": ["x"] * 1025})
        )
    handed = {item["run_id"] for item in claim(api, worker_id)["assignments"]}
    assert handed == {good["id"], theirs.json()["id"]}
    # read from the store: showing such a run through the API is the response models' part
    with api.store.database.read() as connection:
        row = connection.execute(
            select(runs.c.state, runs.c.reason).where(runs.c.id == broken["id"])
        ).one()
        attempt_state = connection.execute(
            select(attempts.c.state).where(attempts.c.run_id == broken["id"])
        ).scalar()
    assert (row.state, attempt_state) == ("failed", "failed")
    assert row.reason.startswith("the stored run could not be read: args: List should have")
    assert claim(api, worker_id)["assignments"] == []  # and it is not handed over later
