"""What an event may cost its tenant and everyone else (docs/events.md#what-an-event-may-cost):
issue 40's event of two 60,000-item lists against filters comparing them deeply — a filter
past the bound refused when saved, the rest stopped at the event's budget and recorded as
refused, and the sender charged for the steps."""

from __future__ import annotations

import json
from typing import Any

from tests.integration.conftest import Api
from tests.integration.test_hooks import herder_headers, make_hook

ITEMS = 60_000
PAYLOAD = {"a": [1] * ITEMS, "b": [1] * ITEMS}  # 240 KB as JSON, within the 256 KiB bound
ATTACK = " and ".join(["payload.a==payload.b"] * 81)  # 2,020 characters
HEAVY = " and ".join(["payload.a==payload.b"] * 16)  # as many as a filter may hold


def make_trigger(api: Api, name: str, filter_source: str) -> Any:
    body = {"name": name, "event": "heavy", "job": "build", "filter": filter_source}
    return api.http.post("/v1/triggers", headers=api.admin, json=body)


def test_a_filter_comparing_the_payload_with_itself_81_times_is_refused_when_saved(
    api: Api,
) -> None:
    api.create_job("build")
    refused = make_trigger(api, "attack", ATTACK)
    assert refused.status_code == 422, refused.text
    [error] = refused.json()["errors"]
    assert error["field"] == "filter"
    assert "81 comparisons read two values of the event or search one; at most " in error["message"]


def test_an_event_stops_at_its_budget_records_the_triggers_past_it_and_charges_its_sender(
    api: Api,
) -> None:
    job = api.create_job("build")
    for n in range(19):
        assert make_trigger(api, f"t{n:02}", HEAVY).status_code == 201
    cheap = make_trigger(api, "u-cheap", "payload.a[0] == 1")  # the newest: evaluated last
    assert cheap.status_code == 201, cheap.text
    quotas = {"submit_rate_per_second": 0.001, "submit_burst": 30}  # no refill in the test
    patched = api.http.patch(
        f"/v1/tenants/{api.tenant_id}", headers=api.admin, json={"quotas": quotas}
    )
    assert patched.status_code == 200, patched.text

    sent = api.http.post(
        "/v1/events", headers=api.admin, json={"name": "heavy", "payload": PAYLOAD}
    )
    assert sent.status_code == 201, sent.text
    outcomes = {one["trigger_name"]: one for one in sent.json()["event"]["outcomes"]}
    assert len(outcomes) == 20
    assert all(one["run_id"] is None for one in outcomes.values())
    assert outcomes["t00"]["error"].startswith(
        "filter: takes more than 100,000 steps on this event's payload"
    )
    assert outcomes["u-cheap"]["error"].startswith(
        "not evaluated: the event's earlier triggers took its budget of 200,000 steps"
    )
    # 21 submissions of the burst of 30 (one and 20 for 200,000 steps): 9 are left.
    statuses = [
        api.http.post(f"/v1/jobs/{job['id']}/runs", headers=api.admin).status_code
        for _ in range(10)
    ]
    assert statuses == [201] * 9 + [429]


def test_an_event_its_sender_cannot_pay_for_is_refused_and_records_nothing(api: Api) -> None:
    api.create_job("build")
    assert make_trigger(api, "t", HEAVY).status_code == 201  # 100,000 steps: 11 submissions
    quotas = {"submit_rate_per_second": 0.001, "submit_burst": 15}
    api.http.patch(f"/v1/tenants/{api.tenant_id}", headers=api.admin, json={"quotas": quotas})
    heavy = {"name": "heavy", "payload": PAYLOAD}
    first = api.http.post("/v1/events", headers=api.admin, json=heavy)
    assert first.status_code == 201, first.text
    again = api.http.post("/v1/events", headers=api.admin, json=heavy)  # 4 left: 1, not 10 more
    assert again.status_code == 429, again.text
    assert "Retry-After" in again.headers
    listed = api.http.get("/v1/events", headers=api.admin).json()["items"]
    assert [event["id"] for event in listed] == [first.json()["event"]["id"]]


def test_a_cheap_event_still_costs_one_submission(api: Api) -> None:
    api.create_job("build")
    make_trigger(api, "t", "payload.a[0] == 1")
    quotas = {"submit_rate_per_second": 0.001, "submit_burst": 3}
    api.http.patch(f"/v1/tenants/{api.tenant_id}", headers=api.admin, json={"quotas": quotas})
    statuses = [
        api.http.post(
            "/v1/events", headers=api.admin, json={"name": "heavy", "payload": {"a": [1]}}
        ).status_code
        for _ in range(4)
    ]
    assert statuses == [201, 201, 201, 429]


def test_an_event_ends_the_200_oldest_waits_on_its_name_and_the_next_event_the_rest(
    api: Api,
) -> None:
    """Issue 40's 800 waits made one event take 15.8 s; an event now looks at 200 at most,
    the ones waiting longest, and a later event of the name finds the others."""
    waits = [{"name": f"w{n:03}", "wait": {"event": {"name": "go"}}} for n in range(250)]
    made = api.http.post("/v1/workflows", headers=api.admin, json={"name": "many", "tasks": waits})
    assert made.status_code == 201, made.text
    started = api.http.post(f"/v1/workflows/{made.json()['id']}/runs", headers=api.admin)
    assert started.status_code == 201, started.text
    first = api.http.post("/v1/events", headers=api.admin, json={"name": "go"}).json()["event"]
    assert len(first["resumed"]) == 200
    second = api.http.post("/v1/events", headers=api.admin, json={"name": "go"}).json()["event"]
    assert len(second["resumed"]) == 50
    assert sorted(first["resumed"])[-1] < sorted(second["resumed"])[0]  # the oldest first
    run = api.http.get(f"/v1/workflow-runs/{started.json()['id']}", headers=api.admin).json()
    assert run["state"] == "succeeded"


def test_a_hook_delivery_is_charged_for_its_filters_as_an_event_is(api: Api) -> None:
    job = api.create_job("build")
    hook = make_hook(api, name="heavy")
    assert make_trigger(api, "t", HEAVY).status_code == 201  # 100,000 steps: 11 submissions
    quotas = {"submit_rate_per_second": 0.001, "submit_burst": 15}
    api.http.patch(f"/v1/tenants/{api.tenant_id}", headers=api.admin, json={"quotas": quotas})
    body = json.dumps(PAYLOAD, separators=(",", ":")).encode()  # 240 KB, within the bound
    delivered = api.http.post(hook["url"], content=body, headers=herder_headers(body, "d-1"))
    assert delivered.status_code == 201, delivered.text
    statuses = [
        api.http.post(f"/v1/jobs/{job['id']}/runs", headers=api.admin).status_code for _ in range(5)
    ]
    assert statuses == [201] * 4 + [429]  # 11 of the burst of 15 went to the delivery
