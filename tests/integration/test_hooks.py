"""Inbound webhooks (docs/events.md): Herder's, GitHub's and Stripe's signatures verified;
a bad, missing, stale or replayed one is a 401 that starts nothing and is recorded without
its body; a sender's retry starts nothing twice; a flood is a 429."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from herder.api.ratelimit import SubmitLimiter
from herder.domain.alerts.webhooks import signature
from tests.clocks import ManualClock
from tests.integration.conftest import Api

SECRET = "whsec_0123456789abcdef"


def make_hook(api: Api, **body: Any) -> dict[str, Any]:
    response = api.http.post("/v1/hooks", headers=api.admin, json={"secret": SECRET, **body})
    assert response.status_code == 201, response.text
    hook: dict[str, Any] = response.json()
    return hook


def herder_headers(
    body: bytes, delivery: str, *, at: int | None = None, secret: str = SECRET
) -> dict[str, str]:
    stamp = int(time.time()) if at is None else at
    return {
        "X-Herder-Signature": signature(secret, stamp, body),
        "X-Herder-Delivery": delivery,
        "Content-Type": "application/json",
    }


def github_headers(body: bytes, delivery: str, event: str = "push") -> dict[str, str]:
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Event": event,
        "Content-Type": "application/json",
    }


def stripe_headers(body: bytes, *, at: int | None = None) -> dict[str, str]:
    stamp = int(time.time()) if at is None else at
    digest = hmac.new(SECRET.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return {"Stripe-Signature": f"t={stamp},v1={digest}", "Content-Type": "application/json"}


def deliveries(api: Api, hook_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.http.get(
        f"/v1/hooks/{hook_id}/deliveries", headers=api.admin
    ).json()["items"]
    return items


def runs(api: Api) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.http.get("/v1/runs", headers=api.admin).json()["items"]
    return items


@pytest.fixture
def build(api: Api) -> None:
    api.create_job("build")


def test_a_github_push_starts_a_build_once_and_a_replay_starts_nothing(
    api: Api, build: None
) -> None:
    hook = make_hook(api, name="github", scheme="github")
    assert hook["url"] == f"/v1/hooks/{api.tenant_id}.{hook['id']}"  # its tenant's, then its
    assert "secret" in hook
    assert "secret" not in api.http.get(f"/v1/hooks/{hook['id']}", headers=api.admin).json()
    api.http.post(
        "/v1/triggers", headers=api.admin,
        json={"name": "on-push", "event": "github.push", "job": "build",
              "filter": "payload.ref == 'refs/heads/main'"},
    )  # fmt: skip
    body = json.dumps({"ref": "refs/heads/main"}).encode()
    headers = github_headers(body, "d-1")
    accepted = api.http.post(hook["url"], content=body, headers=headers)
    assert accepted.status_code == 201, accepted.text
    event = accepted.json()["event"]
    assert event["name"] == "github.push"
    assert event["source"] == f"hook:{hook['id']}"
    assert event["outcomes"][0]["run_id"]
    replay = api.http.post(hook["url"], content=body, headers=headers)
    assert replay.status_code == 401, replay.text
    assert "replay" in replay.json()["detail"]
    assert len(runs(api)) == 1
    recorded = deliveries(api, hook["id"])
    assert [(d["status"], d["http_status"]) for d in recorded] == [
        ("rejected", 401),
        ("accepted", 201),
    ]
    assert recorded[1]["event_id"] == event["id"]


def test_bad_missing_and_stale_signatures_are_401_recorded_without_the_body(
    api: Api, build: None
) -> None:
    hook = make_hook(api, name="ours")
    api.http.post(
        "/v1/triggers", headers=api.admin, json={"name": "t", "event": "ours", "job": "build"}
    )
    body = json.dumps({"secret_payload": "do-not-keep"}).encode()
    now = int(time.time())
    cases = {
        "unsigned": {"X-Herder-Delivery": "d-1"},
        "wrong secret": herder_headers(body, "d-2", secret="x" * 20),
        "stale": herder_headers(body, "d-3", at=now - 3600),
        "ahead": herder_headers(body, "d-4", at=now + 3600),
        "garbled": {"X-Herder-Signature": "v1=zz", "X-Herder-Delivery": "d-5"},
    }
    for case, headers in cases.items():
        response = api.http.post(hook["url"], content=body, headers=headers)
        assert response.status_code == 401, (case, response.text)
    tampered = herder_headers(body, "d-6")
    response = api.http.post(hook["url"], content=body + b" ", headers=tampered)
    assert response.status_code == 401
    assert runs(api) == []
    recorded = deliveries(api, hook["id"])
    assert len(recorded) == 6
    assert {d["status"] for d in recorded} == {"rejected"}
    assert recorded[-1]["delivery_id"] == "d-1"  # as claimed: to match the sender's log
    assert (
        "do-not-keep"
        not in api.http.get(f"/v1/hooks/{hook['id']}/deliveries", headers=api.admin).text
    )
    assert api.http.get("/v1/events", headers=api.admin).json()["items"] == []


def test_a_stripe_retry_signed_anew_is_a_duplicate_and_the_same_signature_a_replay(
    api: Api, build: None
) -> None:
    hook = make_hook(api, name="stripe", scheme="stripe")
    api.http.post(
        "/v1/triggers", headers=api.admin,
        json={"name": "paid", "event": "stripe.invoice.paid", "job": "build"},
    )  # fmt: skip
    body = json.dumps({"id": "evt_1", "type": "invoice.paid", "data": {}}).encode()
    signed = stripe_headers(body, at=int(time.time()) - 5)
    first = api.http.post(hook["url"], content=body, headers=signed)
    assert first.status_code == 201, first.text
    retry = api.http.post(hook["url"], content=body, headers=stripe_headers(body))
    assert retry.status_code == 200
    assert retry.json()["duplicate"] is True
    replay = api.http.post(hook["url"], content=body, headers=signed)  # the same bytes again
    assert replay.status_code == 401
    assert len(runs(api)) == 1
    statuses = [d["status"] for d in deliveries(api, hook["id"])]
    assert statuses == ["rejected", "duplicate", "accepted"]


def test_a_signed_body_that_is_no_event_is_422_and_an_unknown_hook_404(api: Api) -> None:
    hook = make_hook(api, name="ours")
    body = b"not json"
    response = api.http.post(hook["url"], content=body, headers=herder_headers(body, "d-1"))
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "body"
    nameless = b"{}"
    response = api.http.post(
        hook["url"],
        content=nameless,
        headers={**herder_headers(nameless, "d"), "X-Herder-Event": "no spaces allowed"},
    )
    assert response.status_code == 422
    big = b'{"a": "' + b"x" * (256 * 1024) + b'"}'
    assert (
        api.http.post(hook["url"], content=big, headers=herder_headers(big, "d-2")).status_code
        == 413
    )
    assert api.http.post("/v1/hooks/hook_nope", content=b"{}").status_code == 404


def test_a_flood_at_one_hook_is_429_past_its_burst_and_loses_nothing_accepted(
    api: Api, build: None
) -> None:
    hook = make_hook(api, name="ours", rate_per_second=0.001, burst=3)
    api.http.post(
        "/v1/triggers", headers=api.admin, json={"name": "t", "event": "ours", "job": "build"}
    )
    answers = []
    for number in range(6):
        body = json.dumps({"n": number}).encode()
        answers.append(
            api.http.post(hook["url"], content=body, headers=herder_headers(body, f"d-{number}"))
        )
    assert [answer.status_code for answer in answers] == [201, 201, 201, 429, 429, 429]
    assert "Retry-After" in answers[3].headers
    assert len(runs(api)) == 3


def test_a_disabled_or_deleted_hook_starts_nothing(api: Api, build: None) -> None:
    hook = make_hook(api, name="ours")
    api.http.patch(f"/v1/hooks/{hook['id']}", headers=api.admin, json={"enabled": False})
    body = b"{}"
    assert (
        api.http.post(hook["url"], content=body, headers=herder_headers(body, "d-1")).status_code
        == 401
    )
    assert api.http.delete("/v1/hooks/ours", headers=api.admin).status_code == 204
    assert (
        api.http.post(hook["url"], content=body, headers=herder_headers(body, "d-2")).status_code
        == 404
    )
    other = api.as_key(api.other_tenant_key("intruder"))
    assert api.http.get(f"/v1/hooks/{hook['id']}", headers=other).status_code == 404


def test_a_flood_past_the_tenants_rate_is_429_for_events_and_deliveries_alike(
    api: Api, build: None
) -> None:
    clock = ManualClock(datetime.now(UTC))
    api.http.app.state.submit_limiter = SubmitLimiter(  # type: ignore[attr-defined]
        api.store.submit_buckets, api.store.access.tenant_quotas, clock=clock
    )
    quotas = {"submit_rate_per_second": 0.001, "submit_burst": 2}
    patched = api.http.patch(
        f"/v1/tenants/{api.tenant_id}", headers=api.admin, json={"quotas": quotas}
    )
    assert patched.status_code == 200, patched.text
    hook = make_hook(api, name="ours")
    api.http.post(
        "/v1/triggers", headers=api.admin, json={"name": "t", "event": "ours", "job": "build"}
    )
    sent = api.http.post("/v1/events", headers=api.admin, json={"name": "ours"})
    body = b"{}"
    delivered = api.http.post(hook["url"], content=body, headers=herder_headers(body, "d-1"))
    assert (sent.status_code, delivered.status_code) == (201, 201)
    flooded = api.http.post("/v1/events", headers=api.admin, json={"name": "ours"})
    other = b'{"n": 2}'  # the same body signed in the same second would be a replay
    refused = api.http.post(hook["url"], content=other, headers=herder_headers(other, "d-2"))
    assert (flooded.status_code, refused.status_code) == (429, 429)
    assert "Retry-After" in flooded.headers
    assert "Retry-After" in refused.headers
    assert len(runs(api)) == 2  # every event accepted started its run; none refused did


def test_a_rotated_secret_signs_from_then_on_and_the_old_one_is_refused(
    api: Api, build: None
) -> None:
    hook = make_hook(api, name="ours")
    rotated = api.http.post(f"/v1/hooks/{hook['id']}/secret", headers=api.admin, json={})
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["secret"]
    assert new != SECRET
    assert rotated.json()["url"] == hook["url"]
    body = b"{}"
    old = api.http.post(hook["url"], content=body, headers=herder_headers(body, "d-1"))
    assert old.status_code == 401
    signed = herder_headers(body, "d-2", secret=new)
    assert api.http.post(hook["url"], content=body, headers=signed).status_code == 201
    given = api.http.post(
        f"/v1/hooks/{hook['id']}/secret", headers=api.admin, json={"secret": "short"}
    )
    assert given.status_code == 422
    assert given.json()["errors"][0]["field"] == "secret"
    other = api.as_key(api.other_tenant_key("intruder"))
    assert api.http.post(f"/v1/hooks/{hook['id']}/secret", headers=other).status_code == 404


def test_a_hooks_address_names_its_tenant_and_another_tenants_name_finds_nothing(
    api: Api,
) -> None:
    hook = make_hook(api, name="ours")
    other = api.store.access.create_tenant("other")
    legacy = f"/v1/hooks/{hook['id']}"  # as hooks were addressed before cells: still taken
    for number, (url, status) in enumerate(
        [(f"/v1/hooks/{other.id}.{hook['id']}", 404), (legacy, 201), (hook["url"], 201)]
    ):
        body = json.dumps({"delivery": number}).encode()  # not a replay of another
        answer = api.http.post(url, content=body, headers=herder_headers(body, f"d-{number}"))
        assert answer.status_code == status, (url, answer.text)
