"""/metrics counts what happens as it happens: placements, pickups, ends, retries, refused
zombie reports, preemptions, fires, control loop passes and API latency by route. The
counters live as long as the test process, so each test compares a scrape before with one
after."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from prometheus_client import REGISTRY

from herder.control.dispatcher import Dispatcher
from herder.control.leased import LeasedLoop
from tests.integration.conftest import Api
from tests.integration.test_metrics import scrape
from tests.integration.test_placement import heartbeat, register
from tests.integration.test_schedules import Firing, firing  # noqa: F401
from tests.integration.test_worker_protocol import claim, completion, log, report

RETRY = {"max_attempts": 2, "initial_delay_seconds": 0}


def moved(api: Api, act: Callable[[], object]) -> Callable[..., float]:
    """What ``act`` added to each sample: ``change(name, label=value, …)``."""
    before = scrape(api)
    act()
    after = scrape(api)

    def change(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    return change


def test_a_run_placed_handed_over_and_ended_is_timed_and_counted(api: Api) -> None:
    worker_id = register(api, "w")
    api.start_run(api.create_job()["id"])

    def run_it() -> None:
        (assignment,) = claim(api, worker_id)["assignments"]
        report(api, worker_id, completions=[completion(assignment)])

    change = moved(api, run_it)
    assert change("herder_run_queue_wait_seconds_count", priority="medium") == 1
    assert change("herder_run_pickup_seconds_count") == 1
    assert change("herder_run_duration_seconds_count", outcome="succeeded") == 1
    assert change("herder_runs_ended_total", outcome="succeeded") == 1
    assert change("herder_runs_ended_total", outcome="failed") == 0


def test_a_retry_and_zombie_reports_are_counted(api: Api) -> None:
    worker_id = register(api, "w")
    api.start_run(api.create_job("flaky", retry=RETRY)["id"])

    def fail_then_report_late() -> None:
        (assignment,) = claim(api, worker_id)["assignments"]
        report(api, worker_id, completions=[completion(assignment, "failed", 1)])
        (late,) = report(api, worker_id, completions=[completion(assignment)])
        assert late["status"] == 409
        (late_log,) = report(api, worker_id, logs=[log(assignment, 5, "zombie")])
        assert late_log["status"] == 409

    change = moved(api, fail_then_report_late)
    assert change("herder_run_retries_total") == 1
    assert change("herder_runs_ended_total", outcome="failed") == 0  # not ended: it retries
    assert change("herder_zombie_reports_refused_total") == 2


def test_a_heartbeat_naming_a_stale_attempt_is_a_refused_zombie_report(api: Api) -> None:
    worker_id = register(api, "w")
    api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker_id)["assignments"]
    report(api, worker_id, completions=[completion(assignment)])
    change = moved(api, lambda: heartbeat(api, worker_id, assignment))
    assert change("herder_zombie_reports_refused_total") == 1


def test_a_preemption_is_counted(api: Api) -> None:
    worker = register(api, "w", capacity={"cpu": 1})
    low = api.create_job("low", priority="low", preemptible=True)
    api.start_run(low["id"])
    claim(api, worker)
    api.start_run(api.create_job("urgent", priority="high")["id"])
    change = moved(api, lambda: Dispatcher(api.store.placement).step())
    assert change("herder_preemptions_total", cause="priority") == 1
    assert change("herder_runs_queued", **waiting(api, "high", "preempting")) == 1


def waiting(api: Api, priority: str, kind: str) -> dict[str, str]:
    tenant = api.store.access.get_tenant(api.tenant_id).name
    return {"tenant": tenant, "priority": priority, "waiting": kind}


def test_api_latency_is_labelled_by_route_template_never_by_id(api: Api) -> None:
    job = api.create_job()
    path = f"/v1/jobs/{job['id']}"
    change = moved(api, lambda: [api.http.get(path, headers=api.admin) for _ in range(3)])
    route = {"route": "/v1/jobs/{job_id}", "method": "GET"}
    assert change("herder_api_request_duration_seconds_count", **route, status="2xx") == 3
    unknown = f"/v1/jobs/{job['id']}x"
    change = moved(api, lambda: api.http.get(unknown, headers=api.admin))
    assert change("herder_api_request_duration_seconds_count", **route, status="4xx") == 1
    change = moved(api, lambda: api.http.get("/no/such/path"))
    unmatched = {"route": "unmatched", "method": "GET", "status": "4xx"}
    assert change("herder_api_request_duration_seconds_count", **unmatched) == 1
    change = moved(api, lambda: api.http.request("BREW", "/v1/jobs", headers=api.admin))
    brewed = {"route": "/v1/jobs", "method": "other", "status": "4xx"}
    assert change("herder_api_request_duration_seconds_count", **brewed) == 1
    text = api.http.get("/metrics", headers=api.admin).text
    assert job["id"] not in text
    assert "/no/such/path" not in text
    assert "BREW" not in text


def test_a_control_loops_pass_is_timed_and_stamped(api: Api) -> None:
    stop = threading.Event()
    dispatcher = Dispatcher(api.store.placement)

    def one_pass() -> float:
        stop.set()
        dispatcher.step()
        return 0.0  # the loop ends at once, not after the dispatcher's idle wait

    loop = LeasedLoop(
        dispatcher.name, api.store.leases, "test", one_pass,
        ttl_seconds=10, wake=threading.Event(), stop=stop,
    )  # fmt: skip
    began = time.time()
    change = moved(api, loop.run)
    assert change("herder_control_loop_pass_seconds_count", loop="dispatcher") == 1
    stamp = scrape(api)[
        "herder_control_loop_last_pass_timestamp_seconds", (("loop", "dispatcher"),)
    ]
    assert began <= stamp <= time.time()


def test_fires_missed_fires_and_fire_lag_are_counted(firing: Firing) -> None:  # noqa: F811
    schedule_id = firing.schedule()
    firing.clock.advance(60 * 30 + 5)  # half an hour down: 29 missed, the last one runs
    names = [
        "herder_schedule_fires_total", "herder_schedule_missed_fires_total",
        "herder_schedule_fire_lag_seconds_count", "herder_schedule_fire_lag_seconds_sum",
    ]  # fmt: skip
    before = [REGISTRY.get_sample_value(name) or 0.0 for name in names]
    firing.fire(schedule_id)
    after = [REGISTRY.get_sample_value(name) or 0.0 for name in names]
    fires, missed, lags, lag = (late - early for early, late in zip(before, after, strict=True))
    assert (fires, missed, lags) == (1, 29, 1)
    assert lag >= 5  # the last missed minute's run, made 5 s after it was due
