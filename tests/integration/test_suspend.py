"""Suspending and resuming a run through the API and the worker protocol, on both stores: a
suspended run holds nothing (room under ``max_queued``, a worker, a schedule's slot) and
resumes to run to its end; a running one is stopped as a preemption with its stop grace and
runs again as its next attempt; who may, and what conflicts."""

from __future__ import annotations

from typing import Any

from herder.clock import SystemClock
from herder.control.reaper import Reaper
from herder.domain.models import Role
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import register_worker
from tests.integration.test_metrics import scrape
from tests.integration.test_placement import heartbeat, run
from tests.integration.test_queue_room import limit_tenant
from tests.integration.test_worker_protocol import claim, completion, report


def act(api: Api, run_id: object, action: str, headers: dict[str, str] | None = None) -> Any:
    return api.http.post(f"/v1/runs/{run_id}/{action}", headers=headers or api.admin)


def stopped(assignment: dict[str, Any]) -> dict[str, Any]:
    """How a worker reports an attempt it stopped on a preempt order, within its grace."""
    return completion(assignment, "preempted", 143) | {"stopped_by": "sigterm"}


def messages(api: Api, run_id: object) -> list[tuple[str, str]]:
    events = api.http.get(f"/v1/runs/{run_id}/events", headers=api.admin).json()
    return [(event["message"], event["actor"]) for event in events]


def test_a_suspended_run_leaves_the_queue_and_its_room_and_resumes_held_until_there_is_room(
    api: Api,
) -> None:
    limit_tenant(api, max_queued=1)
    job = api.create_job(retry={"max_attempts": 1})
    first = api.start_run(job["id"])
    suspended = act(api, first["id"], "suspend")
    assert suspended.status_code == 200, suspended.text
    assert (suspended.json()["state"], suspended.json()["waiting_reason"]) == ("suspended", None)
    queue = api.http.get("/v1/queue", headers=api.admin).json()
    assert first["id"] not in str(queue)
    second = api.start_run(job["id"])  # the room the suspended run left

    resumed = act(api, first["id"], "resume")
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["state"] == "pending"  # the tenant is at its max_queued again
    assert resumed.json()["waiting_reason"] == "tenant at its max_queued 1: 1 queued"

    worker = register_worker(api, cpu=1)
    (placed,) = claim(api, worker)["assignments"]
    assert placed["run_id"] == second["id"]
    report(api, worker, completions=[completion(placed)])
    Reaper(api.store, SystemClock(), heartbeat_timeout_seconds=600).step()  # releases it
    (again,) = claim(api, worker)["assignments"]
    assert (again["run_id"], again["attempt"]) == (first["id"], 1)
    report(api, worker, completions=[completion(again)])
    assert run(api, first["id"])["state"] == "succeeded"
    assert (messages(api, first["id"])[1][0], messages(api, first["id"])[2][0]) == (
        "suspended while queued",
        "resumed; held: tenant at its max_queued 1: 1 queued",
    )


def test_suspending_a_running_run_stops_it_with_grace_frees_its_worker_and_resume_runs_it_again(
    api: Api,
) -> None:
    worker = register_worker(api, cpu=1)
    job = api.create_job("train", stop_grace_seconds=120, retry={"max_attempts": 1})
    training = api.start_run(job["id"])
    (first,) = claim(api, worker)["assignments"]
    assert first["spec"]["stop_grace_seconds"] == 120

    requested = act(api, training["id"], "suspend")
    assert requested.status_code == 202, requested.text
    assert (requested.json()["state"], requested.json()["suspend_requested"]) == ("running", True)
    assert act(api, training["id"], "suspend").status_code == 202  # asked again: the same
    assert heartbeat(api, worker, first)["preempt"] == [first["attempt_id"]]
    other = api.start_run(api.create_job("other")["id"])
    assert claim(api, worker)["assignments"] == []  # the worker is full until it stops

    report(api, worker, completions=[stopped(first)])
    held = run(api, training["id"])
    assert (held["state"], held["suspend_requested"]) == ("suspended", False)
    assert held["suspensions"] == 1
    (attempt,) = held["attempts"]
    assert (attempt["state"], attempt["reason"], attempt["stopped_by"]) == (
        "preempted", "suspended", "sigterm"
    )  # fmt: skip
    (freed,) = claim(api, worker)["assignments"]  # its room went to the other run
    assert freed["run_id"] == other["id"]
    report(api, worker, completions=[completion(freed)])

    assert act(api, training["id"], "resume").json()["state"] == "queued"
    (second,) = claim(api, worker)["assignments"]
    assert (second["run_id"], second["attempt"]) == (training["id"], 2)
    report(api, worker, completions=[completion(second)])
    assert run(api, training["id"])["state"] == "succeeded"  # one try allowed: none used up
    told = messages(api, training["id"])
    assert (told[2][0], told[2][1][:5]) == (
        "suspend requested; the worker is stopping the attempt",
        "user:",
    )
    assert (told[3][0], told[4][0]) == ("attempt 1 stopped: suspended", "resumed")


def test_a_run_suspended_before_its_worker_heard_of_it_never_starts(api: Api) -> None:
    worker = register_worker(api, cpu=1)
    placed = api.start_run(api.create_job()["id"])
    dispatch(api.store)  # placed, not yet claimed
    assert act(api, placed["id"], "suspend").status_code == 202
    assert claim(api, worker)["assignments"] == []
    held = run(api, placed["id"])
    assert held["state"] == "suspended"
    assert held["attempts"][0]["reason"] == "suspended before it reached its worker"


def test_a_suspended_run_can_be_cancelled_and_then_neither_resumed_nor_suspended(
    api: Api,
) -> None:
    suspended = api.start_run(api.create_job()["id"])
    act(api, suspended["id"], "suspend")
    assert act(api, suspended["id"], "suspend").status_code == 200  # asked again: the same
    cancelled = act(api, suspended["id"], "cancel")
    assert cancelled.json()["state"] == "cancelled"
    for action in ("resume", "suspend"):
        answer = act(api, suspended["id"], action)
        assert answer.status_code == 409
        assert "already cancelled" in answer.json()["detail"]


def test_a_suspend_that_races_the_attempts_own_end_lets_the_end_stand(api: Api) -> None:
    worker = register_worker(api, cpu=2)
    job = api.create_job()
    ending, finished = api.start_run(job["id"]), api.start_run(job["id"])
    first, second = claim(api, worker)["assignments"]
    by_run = {first["run_id"]: first, second["run_id"]: second}
    act(api, ending["id"], "suspend")  # the stop is on its way when it succeeds
    report(api, worker, completions=[completion(by_run[ending["id"]])])
    assert run(api, ending["id"])["state"] == "succeeded"
    assert run(api, ending["id"])["suspend_requested"] is False
    report(api, worker, completions=[completion(by_run[finished["id"]])])
    late = act(api, finished["id"], "suspend")  # the end came first
    assert late.status_code == 409
    assert late.json()["detail"].endswith("only active runs can be suspended")


def test_only_a_suspended_run_resumes_and_twice_is_a_conflict(api: Api) -> None:
    queued = api.start_run(api.create_job()["id"])
    assert act(api, queued["id"], "resume").status_code == 409
    act(api, queued["id"], "suspend")
    assert act(api, queued["id"], "resume").status_code == 200
    again = act(api, queued["id"], "resume")
    assert again.status_code == 409
    assert again.json()["detail"].endswith("is queued, not suspended; only suspended runs resume")


def test_a_run_being_cancelled_cannot_be_suspended(api: Api) -> None:
    worker = register_worker(api)
    running = api.start_run(api.create_job()["id"])
    claim(api, worker)
    assert act(api, running["id"], "cancel").status_code == 202
    refused = act(api, running["id"], "suspend")
    assert refused.status_code == 409
    assert "a cancel wins over a suspend" in refused.json()["detail"]


def test_operators_suspend_and_resume_viewers_may_not_and_other_tenants_see_nothing(
    api: Api,
) -> None:
    queued = api.start_run(api.create_job()["id"])
    keys = {role: api.as_key(api.store.access.create_api_key(api.tenant_id, role, "k")[1])
            for role in Role}  # fmt: skip
    for action in ("suspend", "resume"):
        assert act(api, queued["id"], action, keys[Role.VIEWER]).status_code == 403
        stranger = api.as_key(api.other_tenant_key(f"other-{action}", Role.ADMIN))
        assert act(api, queued["id"], action, stranger).status_code == 404
        assert act(api, "run_nope", action).status_code == 404
    for role in (Role.OPERATOR, Role.DEVELOPER, Role.ADMIN):
        assert act(api, queued["id"], "suspend", keys[role]).status_code == 200, role
        assert act(api, queued["id"], "resume", keys[role]).status_code == 200, role
    assert run(api, queued["id"])["state"] == "queued"


def test_a_suspended_run_holds_no_slot_of_its_schedule(api: Api) -> None:
    job = api.create_job()
    schedule = api.http.post(
        "/v1/schedules",
        headers=api.admin,
        json={"job_id": job["id"], "cron": "@daily", "concurrency_policy": "replace"},
    ).json()
    url = f"/v1/jobs/{job['id']}/runs"
    first = api.http.post(url, headers=api.admin, json={"schedule_id": schedule["id"]}).json()
    act(api, first["id"], "suspend")
    second = api.http.post(url, headers=api.admin, json={"schedule_id": schedule["id"]})
    assert second.status_code == 201
    assert run(api, first["id"])["state"] == "suspended"  # replace leaves it be


def test_the_run_state_gauge_counts_suspended_runs(api: Api) -> None:
    job = api.create_job()
    act(api, api.start_run(job["id"])["id"], "suspend")
    api.start_run(job["id"])
    scraped = scrape(api)
    assert scraped["herder_runs", (("state", "suspended"),)] == 1
    assert scraped["herder_runs", (("state", "queued"),)] == 1


def test_a_suspended_gang_is_stopped_whole_and_resumes_whole(api: Api) -> None:
    one, two = register_worker(api, "one", cpu=1), register_worker(api, "two", cpu=1)
    gang = api.start_run(api.create_job("gang", replicas=2)["id"])
    (a,), (b,) = claim(api, one)["assignments"], claim(api, two)["assignments"]
    assert act(api, gang["id"], "suspend").status_code == 202
    assert heartbeat(api, one, a)["preempt"] == [a["attempt_id"]]
    assert heartbeat(api, two, b)["preempt"] == [b["attempt_id"]]
    report(api, one, completions=[stopped(a)])
    held = run(api, gang["id"])
    assert held["state"] == "suspended"
    assert {attempt["state"] for attempt in held["attempts"]} == {"preempted", "cancelled"}
    assert heartbeat(api, two, b)["drop"] == [b["attempt_id"]]  # its member went with it
    act(api, gang["id"], "resume")
    (a2,), (b2,) = claim(api, one)["assignments"], claim(api, two)["assignments"]
    assert a2["attempt"] == b2["attempt"] == 2
