"""A run's timeline names what really happened, on both stores: a run placed past its
tenant's pool share says it is borrowed (its run, its attempt, an event); a stopped attempt
says whether a higher-priority run, another tenant's reclaimed share or a spent hard budget
stopped it, whatever its worker reported; every attempt goes by its own number."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import Api, Herder
from tests.integration.dispatching import dispatch
from tests.integration.test_budgets import set_budgets, used_cpu
from tests.integration.test_cli_pools import ok
from tests.integration.test_placement import heartbeat, register
from tests.integration.test_pools import Tenant
from tests.integration.test_pools_placement import gpu_job, run_of, start
from tests.integration.test_run_outputs import run_detail
from tests.integration.test_worker_protocol import claim, completion, report

# what a worker says when it stops an attempt it was asked to preempt (it cannot know why)
WORKER_SAW = "preempted by a higher-priority run (SIGTERM)"


def stopped(assignment: dict[str, Any]) -> dict[str, Any]:
    """The worker's report of an attempt it stopped for a preemption."""
    return {**completion(assignment, "preempted", None), "reason": WORKER_SAW}


def first_stop(worker_id: str, why: str) -> str:
    """The event written when the dispatcher stops attempt 1."""
    return (
        f"stopping attempt 1 on {worker_id}: {why}; it will be queued again without using up "
        "a retry"
    )


def messages(detail: dict[str, Any]) -> list[str]:
    return [event["message"] for event in detail["events"]]


def test_a_reclaimed_run_says_for_whose_share_and_a_borrowed_one_says_it_borrows(
    api: Api, herder: Herder
) -> None:
    ml, web = Tenant(api, "ml"), Tenant(api, "web")
    shares = [{"tenant_id": ml.id, "gpus": 1}, {"tenant_id": web.id, "gpus": 1}]
    made = api.http.post("/v1/pools", headers=api.admin, json={"name": "a100", "shares": shares})
    assert made.status_code == 201, made.text
    box = register(api, "a100-box", labels={"pool": "a100"}, capacity={"gpus": 2})
    web_runs = start(api, web, gpu_job(api, web), 2)
    assignments = {a["run_id"]: a for a in claim(api, box)["assignments"]}
    details = {run_id: run_of(api, web, run_id) for run_id in web_runs}
    (lent,) = [run_id for run_id, detail in details.items() if detail["borrowed"]]
    (owned,) = [run_id for run_id in web_runs if run_id != lent]
    assert [attempt["borrowed"] for attempt in details[lent]["attempts"]] == [True]
    assert [attempt["borrowed"] for attempt in details[owned]["attempts"]] == [False]
    assert (
        f"attempt 1 placed on {box}, borrowed past its tenant's share in pool a100: it may be "
        "reclaimed for another tenant's share"
    ) in messages(details[lent])
    assert f"attempt 1 placed on {box}" in messages(details[owned])
    web_key = web.headers["Authorization"].removeprefix("Bearer ")
    shown = ok(herder("run", "show", lent, key=web_key))
    assert "borrowed: placed past its tenant's share of the pool, it may be reclaimed" in shown
    assert "1 borrowed" in shown
    assert "borrowed" not in ok(herder("run", "show", owned, key=web_key))

    (ml_run,) = start(api, ml, gpu_job(api, ml))
    dispatch(api.store)
    assert heartbeat(api, box, *assignments.values())["preempt"] == [
        assignments[lent]["attempt_id"]
    ]
    why = f"reclaimed for tenant {ml.id}'s share in pool a100 (run {ml_run})"
    assert first_stop(box, why) in messages(run_of(api, web, lent))
    report(api, box, completions=[stopped(assignments[lent])])
    detail = run_of(api, web, lent)
    assert (detail["state"], detail["borrowed"]) == ("queued", False)
    assert detail["attempts"][0]["reason"] == why
    assert f"attempt 1 preempted: {why}" in messages(detail)


def test_a_priority_preemption_says_so_and_later_attempts_go_by_their_own_number(
    api: Api,
) -> None:
    worker = register(api, "w", capacity={"cpu": 1})
    retry = {"max_attempts": 2, "initial_delay_seconds": 0}
    low = api.create_job("low", priority="low", preemptible=True, retry=retry)
    victim = api.start_run(low["id"])
    (first,) = claim(api, worker)["assignments"]
    urgent = api.start_run(api.create_job("urgent", priority="high")["id"])
    dispatch(api.store)
    assert heartbeat(api, worker, first)["preempt"] == [first["attempt_id"]]
    report(api, worker, completions=[stopped(first)])
    why = f"stopped for the higher-priority run {urgent['id']} (high over low)"
    detail = run_detail(api, victim["id"])
    assert detail["attempts"][0]["reason"] == why
    assert first_stop(worker, why) in messages(detail)
    assert f"attempt 1 preempted: {why}" in messages(detail)

    (placed,) = claim(api, worker)["assignments"]
    report(api, worker, completions=[completion(placed)])  # the urgent run
    (second,) = claim(api, worker)["assignments"]
    assert (second["run_id"], second["attempt"]) == (victim["id"], 2)
    report(api, worker, completions=[completion(second, "failed", 1)])
    (ended,) = [
        event
        for event in run_detail(api, victim["id"])["events"]
        if event["to_state"] == "retry_wait"
    ]
    assert ended["attempt"] == 2
    assert ended["message"].startswith("attempt 2 failed: exit 1; retry 1 of 1 in ")


def test_a_hard_budget_stop_names_the_budget(api: Api) -> None:
    hard = {"budgets": [{"period": "month", "cpu_seconds": 40, "hard": True}]}
    assert set_budgets(api, api.tenant_id, hard).status_code == 200
    worker = register(api, "w")
    # its CPU counts as asked times the time it has run: a whole core made the figure below
    # 51 once a loaded CI box took a second over this test
    tiny = {"cpu": 0.01, "memory_mb": 64}
    running = api.start_run(api.create_job("long", resources=tiny)["id"])
    (assignment,) = claim(api, worker)["assignments"]
    used_cpu(api, worker, 50)
    dispatch(api.store)
    assert heartbeat(api, worker, assignment)["preempt"] == [assignment["attempt_id"]]
    report(api, worker, completions=[stopped(assignment)])
    detail = run_detail(api, running["id"])
    why = detail["attempts"][0]["reason"]
    assert why.startswith("stopped by the tenant's hard month budget: cpu 50 of 40 s used; ")
    assert first_stop(worker, why) in messages(detail)
    assert f"attempt 1 preempted: {why}" in messages(detail)
