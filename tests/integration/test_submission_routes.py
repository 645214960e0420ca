"""Every route that makes runs is a submission: past the tenant's rate it answers 429 and
makes nothing (docs/tenants.md#submission-rate-limits).

The routes that make runs are those whose OpenAPI operation documents a 429; every other
route that changes something is listed below with why it makes no run. A new route is then
either called here and held to the rate, or says why not: never forgotten.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from herder.api.ratelimit import SubmitLimiter
from herder.store.schema import runs
from tests.clocks import ManualClock
from tests.integration.conftest import Api
from tests.integration.openapi import operations

HOOK_SECRET = "whsec_0123456789abcdef"


@dataclass
class World:
    """One object of each kind a run-making route names, made before the rate is set."""

    api: Api
    job_id: str
    ended_run_id: str
    workflow_id: str
    ended_workflow_runs: list[str]
    schedule_id: str
    hook_url: str


# How each run-making route is called; ``n`` makes every call a new request (another event
# id, delivery, window, workflow run), so the one refused would otherwise have made a run.
Call = Callable[[World, int], httpx.Response]


def _post(world: World, url: str, body: Any = None, **headers: str) -> httpx.Response:
    response: httpx.Response = world.api.http.post(
        url, headers={**world.api.admin, **headers}, json=body
    )
    return response


def _backfill(world: World, n: int) -> httpx.Response:
    end = datetime(2026, 1, 10, tzinfo=UTC) - timedelta(days=2 * n)
    window = {"start": (end - timedelta(days=1)).isoformat(), "end": end.isoformat()}
    return _post(world, f"/v1/schedules/{world.schedule_id}/backfills", window)


def _hook_delivery(world: World, n: int) -> httpx.Response:
    body = json.dumps({"ref": f"refs/heads/{n}"}).encode()
    digest = hmac.new(HOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Delivery": f"delivery-{n}",
        "X-GitHub-Event": "push",
        "Content-Type": "application/json",
    }
    response: httpx.Response = world.api.http.post(world.hook_url, content=body, headers=headers)
    return response


CALLS: dict[tuple[str, str], Call] = {
    ("POST", "/v1/jobs/{job_id}/runs"): lambda w, n: _post(w, f"/v1/jobs/{w.job_id}/runs"),
    ("POST", "/v1/runs/batch"): lambda w, n: _post(
        w, "/v1/runs/batch", {"runs": [{"job_id": w.job_id}]}
    ),
    ("POST", "/v1/runs/{run_id}/rerun"): lambda w, n: _post(w, f"/v1/runs/{w.ended_run_id}/rerun"),
    ("POST", "/v1/workflows/{workflow_id}/runs"): lambda w, n: _post(
        w, f"/v1/workflows/{w.workflow_id}/runs"
    ),
    ("POST", "/v1/workflow-runs/{workflow_run_id}/repair"): lambda w, n: _post(
        w, f"/v1/workflow-runs/{w.ended_workflow_runs[n]}/repair", {"repair": 0}
    ),
    ("POST", "/v1/schedules/{schedule_id}/trigger"): lambda w, n: _post(
        w, f"/v1/schedules/{w.schedule_id}/trigger"
    ),
    ("POST", "/v1/schedules/{schedule_id}/backfills"): _backfill,
    ("POST", "/v1/events"): lambda w, n: _post(w, "/v1/events", {"name": "push", "id": f"e{n}"}),
    ("POST", "/v1/hooks/{hook_id}"): _hook_delivery,
}

# Every other route that changes something, and why it is no submission.
MAKES_NO_RUN = {
    **dict.fromkeys(
        [
            ("POST", "/v1/artifacts"), ("POST", "/v1/jobs"), ("PATCH", "/v1/jobs/{job_id}"),
            ("DELETE", "/v1/jobs/{job_id}"), ("POST", "/v1/schedules"),
            ("PATCH", "/v1/schedules/{schedule_id}"), ("DELETE", "/v1/schedules/{schedule_id}"),
            ("POST", "/v1/limits"), ("PATCH", "/v1/limits/{limit_id}"),
            ("DELETE", "/v1/limits/{limit_id}"), ("POST", "/v1/triggers"),
            ("PATCH", "/v1/triggers/{trigger_id}"), ("DELETE", "/v1/triggers/{trigger_id}"),
            ("POST", "/v1/hooks"), ("PATCH", "/v1/hooks/{hook_id}"),
            ("DELETE", "/v1/hooks/{hook_id}"), ("POST", "/v1/hooks/{hook_id}/secret"),
            ("POST", "/v1/workflows"), ("PUT", "/v1/workflows/{workflow_id}"),
            ("DELETE", "/v1/workflows/{workflow_id}"), ("POST", "/v1/alert-channels"),
            ("PATCH", "/v1/alert-channels/{channel_id}"),
            ("DELETE", "/v1/alert-channels/{channel_id}"),
            ("POST", "/v1/alert-channels/{channel_id}/test"), ("POST", "/v1/alert-rules"),
            ("PATCH", "/v1/alert-rules/{rule_id}"), ("DELETE", "/v1/alert-rules/{rule_id}"),
            ("PUT", "/v1/secrets/{name}"), ("DELETE", "/v1/secrets/{name}"),
            ("POST", "/v1/cron/preview"), ("POST", "/v1/workflows/check"),
            ("PUT", "/v1/jobs/{job_id}/notices"), ("DELETE", "/v1/jobs/{job_id}/notices"),
        ],
        "a definition, or nothing stored",
    ),
    **dict.fromkeys(
        [
            ("POST", "/v1/runs/{run_id}/cancel"), ("POST", "/v1/runs/{run_id}/suspend"),
            ("POST", "/v1/runs/{run_id}/priority"), ("DELETE", "/v1/runs/{run_id}/checkpoint"),
            ("POST", "/v1/backfills/{backfill_id}/cancel"),
            ("POST", "/v1/schedules/{schedule_id}/pause"),
            ("POST", "/v1/workflow-runs/{workflow_run_id}/cancel"),
            ("POST", "/v1/workflow-runs/{workflow_run_id}/suspend"),
        ],
        "stops or changes a run that exists",
    ),
    **dict.fromkeys(
        [
            ("POST", "/v1/runs/{run_id}/resume"),
            ("POST", "/v1/workflow-runs/{workflow_run_id}/resume"),
            ("POST", "/v1/workflow-runs/{workflow_run_id}/tasks/{task}/approve"),
            ("POST", "/v1/workflow-runs/{workflow_run_id}/tasks/{task}/reject"),
        ],
        "goes on with work already admitted, once: a workflow run paid for all its tasks",
    ),
    ("POST", "/v1/schedules/{schedule_id}/resume"): "fires resume later; none is caught up",
    **dict.fromkeys(
        [
            ("POST", "/v1/tenants"), ("PATCH", "/v1/tenants/{tenant_id}"),
            ("POST", "/v1/tenants/{tenant_id}/keys"), ("POST", "/v1/worker-tokens"),
            ("POST", "/v1/pools"), ("PATCH", "/v1/pools/{pool_id}"),
            ("DELETE", "/v1/pools/{pool_id}"), ("POST", "/v1/workers/{worker_id}/drain"),
            ("POST", "/v1/workers/{worker_id}/undrain"),
            ("POST", "/v1/workers/{worker_id}/forget"), ("POST", "/v1/keys"),
            ("POST", "/v1/keys/{key_id}/revoke"), ("PUT", "/v1/tenants/{tenant_id}/budgets"),
        ],
        "administration",
    ),
    **dict.fromkeys(
        [
            ("PUT", "/v1/tenants/{tenant_id}/move"), ("POST", "/v1/tenants/import"),
            ("DELETE", "/v1/tenants/{tenant_id}/import"),
            ("PUT", "/v1/tenants/{tenant_id}/import/artifacts/{artifact_id}"),
        ],
        "a tenant's move between cells: definitions copied, no run; its schedules fire on in "
        "the new cell from the instant the old one stopped at",
    ),
    **dict.fromkeys(
        [
            ("POST", "/v1/workers"), ("POST", "/v1/workers/{worker_id}/heartbeat"),
            ("POST", "/v1/workers/{worker_id}/claim"), ("POST", "/v1/workers/{worker_id}/reports"),
            ("PUT", "/v1/workers/{worker_id}/attempts/{attempt_id}/checkpoint"),
            ("POST", "/v1/attempts/{attempt_id}/logs"),
            ("POST", "/v1/attempts/{attempt_id}/complete"),
        ],
        "the worker protocol: attempts of runs already made",
    ),
    **dict.fromkeys(
        [
            ("POST", "/auth/cli-sessions"), ("POST", "/auth/logout"),
            ("POST", "/v1/sessions/{session_id}/revoke"),
        ],
        "signing in and out: a person's session opened or ended",
    ),
}  # fmt: skip

MUTATING = [(method, path) for method, path, _ in operations() if method != "GET"]
RUN_MAKING = [
    (method, path)
    for method, path, operation in operations()
    if "429" in operation.get("responses", {})
]


def test_every_route_that_changes_something_makes_runs_or_says_why_not() -> None:
    unclassified = set(MUTATING) - set(RUN_MAKING) - set(MAKES_NO_RUN)
    assert not unclassified, f"make these submissions, or list why they make no run: {unclassified}"
    assert not set(RUN_MAKING) & set(MAKES_NO_RUN)
    assert set(CALLS) == set(RUN_MAKING), "every route documenting 429 is called below"


def _world(api: Api) -> World:
    job_id = api.create_job("build")["id"]
    run = api.start_run(job_id)
    cancelled = api.http.post(f"/v1/runs/{run['id']}/cancel", headers=api.admin)
    assert cancelled.status_code == 200, cancelled.text
    made = api.http.post(
        "/v1/workflows",
        headers=api.admin,
        json={"name": "flow", "tasks": [{"name": "t", "job": "build"}]},
    )
    assert made.status_code == 201, made.text
    workflow_id = made.json()["id"]
    ended = []
    for _ in range(2):
        started = api.http.post(f"/v1/workflows/{workflow_id}/runs", headers=api.admin)
        assert started.status_code == 201, started.text
        workflow_run_id = started.json()["id"]
        stopped = api.http.post(f"/v1/workflow-runs/{workflow_run_id}/cancel", headers=api.admin)
        assert stopped.json()["state"] == "cancelled", stopped.text
        ended.append(workflow_run_id)
    schedule = api.http.post(
        "/v1/schedules", headers=api.admin, json={"job_id": job_id, "cron": "@daily"}
    )
    assert schedule.status_code == 201, schedule.text
    for name, event in (("on-push", "push"), ("on-github-push", "github.push")):
        trigger = {"name": name, "event": event, "job": "build"}
        made = api.http.post("/v1/triggers", headers=api.admin, json=trigger)
        assert made.status_code == 201, made.text
    hook = api.http.post(
        "/v1/hooks",
        headers=api.admin,
        json={"name": "github", "scheme": "github", "secret": HOOK_SECRET},
    )
    assert hook.status_code == 201, hook.text
    return World(
        api, job_id, run["id"], workflow_id, ended, schedule.json()["id"], hook.json()["url"]
    )


def _runs_made(api: Api) -> int:
    with api.store.database.read() as connection:
        count: int = connection.execute(
            select(func.count()).select_from(runs).where(runs.c.tenant_id == api.tenant_id)
        ).scalar_one()
    return count


@pytest.mark.parametrize(("method", "path"), RUN_MAKING)
def test_past_the_rate_a_route_that_makes_runs_answers_429_and_makes_none(
    api: Api, method: str, path: str
) -> None:
    world = _world(api)
    clock = ManualClock(datetime.now(UTC))
    api.http.app.state.submit_limiter = SubmitLimiter(  # type: ignore[attr-defined]
        api.store.submit_buckets, api.store.access.tenant_quotas, clock=clock
    )
    quotas = {"submit_rate_per_second": 1, "submit_burst": 1}
    patched = api.http.patch(
        f"/v1/tenants/{api.tenant_id}", headers=api.admin, json={"quotas": quotas}
    )
    assert patched.status_code == 200, patched.text
    call = CALLS[method, path]
    before = _runs_made(api)
    admitted = call(world, 0)
    assert admitted.status_code in (200, 201), admitted.text
    made = _runs_made(api)
    assert made > before, "the route made a run"
    refused = call(world, 1)
    assert refused.status_code == 429, refused.text
    assert "Retry-After" in refused.headers
    assert _runs_made(api) == made
    clock.advance(1)
    again = call(world, 1)
    assert again.status_code in (200, 201), again.text  # the same request, a second later
