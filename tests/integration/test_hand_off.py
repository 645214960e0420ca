"""A report's hand-off (``app.hand_off``): the worker that reports a workflow task's end,
with room, gets the next task in the reply, placed in the report's own transaction, with no
dispatcher pass and no claim; otherwise (no room asked, other runs waiting, a run the worker's
view cannot judge, a worker another placer holds) the dispatcher places it as before. On both
stores; the held worker on PostgreSQL."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from herder.store.history.live import live_floor
from herder.store.notifications import WORK_CHANNEL, WORKER_CHANNEL
from herder.store.schema import attempts, workers
from herder.store.statements import KINDS
from tests.integration.conftest import Api
from tests.integration.registered import as_worker, register_worker
from tests.integration.test_worker_protocol import claim, completion
from tests.integration.test_workflows import chain, job, run_of, start, workflow


def reported(api: Api, worker_id: str, assignment: dict[str, Any], **body: Any) -> dict[str, Any]:
    """The worker reports the attempt succeeded (with ``body``: its room); the whole reply."""
    response = api.http.post(
        f"/v1/workers/{worker_id}/reports",
        headers=as_worker(worker_id),
        json={"completions": [completion(assignment)], **body},
    )
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    assert result["status"] == 200, result
    answer: dict[str, Any] = response.json()
    return answer


def first_task(api: Api, tasks: list[dict[str, Any]]) -> tuple[str, str, dict[str, Any]]:
    """A worker, a workflow run of ``tasks`` started, and the first task's assignment."""
    job(api, "work")
    worker_id = register_worker(api, cpu=8, memory_mb=8192)
    flow_run = start(api, workflow(api, tasks=tasks)["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    return worker_id, flow_run["id"], assignment


def run_state(api: Api, run_id: str) -> str:
    response = api.http.get(f"/v1/runs/{run_id}", headers=api.admin)
    assert response.status_code == 200, response.text
    state: str = response.json()["state"]
    return state


def test_the_registration_says_the_server_hands_over_in_reports(api: Api) -> None:
    response = api.http.post(
        "/v1/workers",
        headers=api.worker,
        json={"name": "w", "capacity": {"cpu": 1, "memory_mb": 512, "gpus": 0}},
    )
    assert response.status_code == 201, response.text
    assert response.json()["hands_over_in_reports"] is True


def test_the_next_task_comes_in_the_reply_of_the_report_that_ended_the_one_before(
    api: Api,
) -> None:
    worker_id, flow_run, first = first_task(api, chain("a", "b"))
    answer = reported(api, worker_id, first, room=4)
    (handed,) = answer["assignments"]
    assert handed["run_id"] == run_of(api, flow_run, "b")
    assert run_state(api, handed["run_id"]) == "running"
    with api.store.database.read() as connection:
        delivered = connection.execute(
            select(attempts.c.worker_id, attempts.c.delivered_at).where(
                attempts.c.id == handed["attempt_id"]
            )
        ).one()
    assert delivered.worker_id == worker_id
    assert delivered.delivered_at is not None
    assert claim(api, worker_id)["assignments"] == []  # handed over once


def test_a_hand_off_of_all_that_waited_wakes_no_dispatcher(api: Api) -> None:
    """Its notice says the worker's attempt ended (the log compactor's and the dispatcher's
    view of the worker need it), not that capacity or work wait to be placed."""
    worker_id, _, first = first_task(api, chain("a", "b"))
    heard: list[tuple[str, str]] = []
    api.store.database.subscribe(lambda channel, payload: heard.append((channel, payload)))
    assert len(reported(api, worker_id, first, room=4)["assignments"]) == 1
    assert (WORKER_CHANNEL, f"handed:{worker_id}") in heard
    assert (WORKER_CHANNEL, f"capacity:{worker_id}") not in heard
    assert all(channel != WORK_CHANNEL for channel, _ in heard)


# What a report that ends a chain's task and hands over the next sends the database, counted
# as the bench counts a chain task (``herder_database_statements_total``: statements, commits,
# rollbacks): 31 when the hand-off read its worker and the worker's attempts twice (for its
# snapshot, then under the lock), and its runs, tenants, budgets and pools' shares apart; 24
# since the worker is read once, locked, and the queue's head with its tenants in one; 21
# since its three events are one insert at the end, with the notices on PostgreSQL; 17 since
# the pools come with the worker's lock, the workflow's tenant with its run's, and on
# PostgreSQL the handover marks what it reads and the attempt's end returns what its charge
# needs. SQLite counts three more: its BEGIN IMMEDIATE, and those two reads, which its
# RETURNING (no qualified names, no CTE) cannot carry.
REPORT_THAT_HANDS_OFF = 17
SQLITE_BEGIN = 1  # SQLite's writes start with a statement of their own
SQLITE_MORE = SQLITE_BEGIN + 2


def statements_sent() -> float:
    """What this process sent the database so far, all kinds."""
    kinds = (*KINDS, "other", "commit", "rollback")
    counted = (
        REGISTRY.get_sample_value("herder_database_statements_total", {"kind": kind})
        for kind in kinds
    )
    return sum(value or 0.0 for value in counted)


def test_a_report_that_hands_off_the_next_task_sends_few_statements(api: Api) -> None:
    worker_id, _, first = first_task(api, chain("a", "b", "c"))
    with api.store.database.read() as connection:  # the live floor read now, not in the report
        live_floor(connection, api.store.clock.now())
    before = statements_sent()
    assert len(reported(api, worker_id, first, room=4)["assignments"]) == 1
    more = 0 if api.store.database.is_postgres else SQLITE_MORE
    assert statements_sent() - before <= REPORT_THAT_HANDS_OFF + more


def test_a_report_that_asks_for_no_room_leaves_the_next_task_to_the_dispatcher(api: Api) -> None:
    worker_id, flow_run, first = first_task(api, chain("a", "b"))
    assert reported(api, worker_id, first)["assignments"] == []
    successor = run_of(api, flow_run, "b")
    assert run_state(api, successor) == "queued"
    (claimed,) = claim(api, worker_id)["assignments"]
    assert claimed["run_id"] == successor


def test_with_another_run_waiting_the_dispatcher_decides_in_queue_order(api: Api) -> None:
    worker_id, flow_run, first = first_task(api, chain("a", "b"))
    waiting = api.start_run(api.create_job("earlier")["id"])
    assert reported(api, worker_id, first, room=4)["assignments"] == []
    assert run_state(api, run_of(api, flow_run, "b")) == "queued"
    assert run_state(api, waiting["id"]) == "queued"


def test_a_fan_out_wider_than_the_room_goes_to_the_dispatcher(api: Api) -> None:
    tasks: list[dict[str, Any]] = [{"name": "a", "job": "work"}]
    tasks += [{"name": f"b{index}", "job": "work", "depends_on": ["a"]} for index in range(3)]
    worker_id, _, first = first_task(api, tasks)
    assert reported(api, worker_id, first, room=2)["assignments"] == []
    assert len(claim(api, worker_id)["assignments"]) == 3


def test_a_task_of_a_tenant_with_an_in_use_quota_goes_to_the_dispatcher(api: Api) -> None:
    quota = {"quotas": {"max_cpu": 4}}
    response = api.http.patch(f"/v1/tenants/{api.tenant_id}", headers=api.admin, json=quota)
    assert response.status_code == 200, response.text
    worker_id, flow_run, first = first_task(api, chain("a", "b"))
    assert reported(api, worker_id, first, room=4)["assignments"] == []
    assert run_state(api, run_of(api, flow_run, "b")) == "queued"


def test_a_task_with_a_limit_key_goes_to_the_dispatcher(api: Api) -> None:
    limit = {"name": "partner-api", "max_running": 5}
    assert api.http.post("/v1/limits", headers=api.admin, json=limit).status_code == 201
    job(api, "work")
    keyed = api.create_job("keyed", limits=[{"limit": "partner-api", "key": "one"}])
    tasks = [{"name": "a", "job": "work"}, {"name": "b", "job": keyed["name"], "depends_on": ["a"]}]
    worker_id = register_worker(api, cpu=8, memory_mb=8192)
    flow_run = start(api, workflow(api, tasks=tasks)["id"])["id"]
    (first,) = claim(api, worker_id)["assignments"]
    assert reported(api, worker_id, first, room=4)["assignments"] == []
    assert run_state(api, run_of(api, flow_run, "b")) == "queued"


def test_a_task_of_a_tenant_whose_budget_the_report_spent_goes_to_the_dispatcher(
    api: Api,
) -> None:
    budgets = {"budgets": [{"period": "day", "cpu_seconds": 40}]}
    response = api.http.put(f"/v1/tenants/{api.tenant_id}/budgets", headers=api.admin, json=budgets)
    assert response.status_code == 200, response.text
    worker_id, flow_run, first = first_task(api, chain("a", "b"))
    usage = {"cpu_user_seconds": 40, "cpu_system_seconds": 1, "max_rss_kb": 10}
    response = api.http.post(
        f"/v1/workers/{worker_id}/reports",
        headers=as_worker(worker_id),
        json={"completions": [{**completion(first), "usage": usage}], "room": 4},
    )
    assert response.status_code == 200, response.text
    assert response.json()["assignments"] == []
    assert run_state(api, run_of(api, flow_run, "b")) == "queued"


def test_a_pool_s_worker_is_handed_nothing(api: Api) -> None:
    share = [{"tenant_id": api.tenant_id, "cpu": 8}]
    response = api.http.post("/v1/pools", headers=api.admin, json={"name": "a100", "shares": share})
    assert response.status_code == 201, response.text
    job(api, "work")
    api.create_job("pooled", pool="a100", retry={"max_attempts": 1})
    tasks = [{"name": "a", "job": "pooled"}, {"name": "b", "job": "work", "depends_on": ["a"]}]
    worker_id = register_worker(api, cpu=8, memory_mb=8192, labels={"pool": "a100"})
    flow_run = start(api, workflow(api, tasks=tasks)["id"])["id"]
    (first,) = claim(api, worker_id)["assignments"]
    assert reported(api, worker_id, first, room=4)["assignments"] == []
    assert run_state(api, run_of(api, flow_run, "b")) == "queued"


def test_a_worker_another_placer_holds_is_not_waited_for(api: Api) -> None:
    if not api.store.database.is_postgres:
        pytest.skip("two write transactions at once are PostgreSQL's (SQLite has one writer)")
    worker_id, flow_run, first = first_task(api, chain("a", "b"))
    holding, release = threading.Event(), threading.Event()

    def a_dispatcher_holds_the_worker() -> None:
        with api.store.database.write() as connection:
            connection.execute(
                select(workers.c.id).where(workers.c.id == worker_id).with_for_update()
            )
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=a_dispatcher_holds_the_worker)
    holder.start()
    try:
        assert holding.wait(10)
        began = time.monotonic()
        assert reported(api, worker_id, first, room=4)["assignments"] == []
        assert time.monotonic() - began < 5  # it did not wait for the lock
    finally:
        release.set()
        holder.join(30)
    assert run_state(api, run_of(api, flow_run, "b")) == "queued"


@pytest.mark.parametrize("room", [-1, 10_001, "all"])
def test_a_room_out_of_bounds_is_a_422_naming_it(api: Api, room: object) -> None:
    worker_id, _, first = first_task(api, chain("a", "b"))
    response = api.http.post(
        f"/v1/workers/{worker_id}/reports",
        headers=as_worker(worker_id),
        json={"completions": [completion(first)], "room": room},
    )
    assert response.status_code == 422, response.text
    assert "room" in response.text
