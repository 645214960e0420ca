"""A limit's keys take turns by the starts they had, through the dispatcher and the worker
protocol on both stores: one worker with one slot starts acme, globex, acme, globex, then
acme's rest, and ``GET /v1/queue`` lists the runs in the order they start; a deleted
limit takes its keys' last starts with it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from herder.store.schema import limit_last_starts
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import register_worker
from tests.integration.test_limits_placement import job, make_limit, submit
from tests.integration.test_pools import Tenant
from tests.integration.test_worker_protocol import claim, completion, report


def queued_ids(api: Api, tenant: Tenant, **params: Any) -> list[str]:
    response = api.http.get("/v1/queue", headers=tenant.headers, params=params)
    assert response.status_code == 200, response.text
    return [item["run_id"] for item in response.json()["items"]]


def test_with_one_slot_keys_alternate_and_the_queue_shows_the_order(api: Api) -> None:
    saas = Tenant(api, "saas")
    make_limit(api, saas, "partner-api", max_running=10)  # room for all: only turns decide
    call = job(api, saas)
    worker_id = register_worker(api, "w1", max_slots=1)
    key_of = {submit(api, saas, call, key): key for key in ["acme"] * 4 + ["globex"] * 2}
    started: list[str] = []
    shown: list[list[str]] = []  # the queue each time the slot is free
    for _ in key_of:
        shown.append(queued_ids(api, saas))
        [assignment] = claim(api, worker_id, max_runs=1)["assignments"]  # a pass, then a claim
        started.append(assignment["run_id"])
        [done] = report(api, worker_id, completions=[completion(assignment)])
        assert done["status"] == 200, done
    assert [key_of[run_id] for run_id in started] == [
        "acme", "globex", "acme", "globex", "acme", "acme",
    ]  # fmt: skip
    assert shown == [started[index:] for index in range(len(started))]
    with api.store.database.read() as connection:
        kept = connection.execute(select(limit_last_starts.c.key)).scalars()
        assert sorted(kept) == ["acme", "globex"]  # a row a key, not a row a start


def test_pages_of_the_queue_follow_the_turns(api: Api) -> None:
    saas = Tenant(api, "saas")
    make_limit(api, saas, "partner-api", max_running=10)
    call = job(api, saas)
    key_of = {submit(api, saas, call, key): key for key in ["acme"] * 3 + ["globex"] * 2}
    paged: list[str] = []
    cursor = ""
    while True:
        response = api.http.get(
            "/v1/queue", headers=saas.headers, params={"limit": 2, "cursor": cursor}
        )
        assert response.status_code == 200, response.text
        paged += [item["run_id"] for item in response.json()["items"]]
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
    assert [key_of[run_id] for run_id in paged] == ["acme", "globex", "acme", "globex", "acme"]
    assert paged == queued_ids(api, saas)


def test_a_deleted_limit_takes_its_keys_last_starts_with_it(api: Api) -> None:
    saas = Tenant(api, "saas")
    make_limit(api, saas, "partner-api", max_running=1)
    call = job(api, saas)
    register_worker(api, "w1")
    submit(api, saas, call, "acme")
    dispatch(api.store)
    with api.store.database.read() as connection:
        assert connection.execute(select(limit_last_starts.c.key)).scalars().all() == ["acme"]
    cleared = api.http.patch(f"/v1/jobs/{call}", headers=saas.headers, json={"limits": []})
    assert cleared.status_code == 200, cleared.text
    assert api.http.delete("/v1/limits/partner-api", headers=saas.headers).status_code == 204
    with api.store.database.read() as connection:
        assert connection.execute(select(limit_last_starts.c.key)).all() == []
