"""Inbound webhooks against an anonymous sender (issue 40): a captured delivery sent again
under another delivery id or kind starts nothing (3); garbage posted to a hook's URL spends
none of its tenant's submission rate and is recorded within a bound, kept a day (5); a
signature header no parser should choke on is a 401, never a 500 (11); a header that signs
or selects a delivery given twice is refused (15)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from herder.api.ratelimit import SubmitLimiter
from herder.app.hooks import HookRates, receive_delivery
from herder.domain.alerts.webhooks import signature
from herder.domain.errors import Unauthorized
from herder.domain.events import ReceivedEvent
from herder.domain.hooks import UNVERIFIED_BURST, UNVERIFIED_PER_SECOND, Replayed
from herder.store.hooks import HookRepository
from tests.clocks import ManualClock
from tests.integration.conftest import Api
from tests.integration.test_hooks import (
    SECRET,
    deliveries,
    github_headers,
    herder_headers,
    make_hook,
    runs,
)


@pytest.fixture
def jobs(api: Api) -> dict[str, str]:
    return {name: api.create_job(name)["id"] for name in ("ship", "refund", "cleanup")}


def trigger(api: Api, name: str, event: str, job: str) -> None:
    made = api.http.post(
        "/v1/triggers", headers=api.admin, json={"name": name, "event": event, "job": job}
    )
    assert made.status_code == 201, made.text


def jobs_run(api: Api) -> list[str]:
    return sorted(run["job_name"] for run in runs(api))


def test_a_herder_delivery_sent_again_under_a_new_id_or_kind_starts_nothing(
    api: Api, jobs: dict[str, str]
) -> None:
    hook = make_hook(api, name="orders")
    trigger(api, "ship", "orders.paid", "ship")
    trigger(api, "refund", "orders.refunded", "refund")
    body = json.dumps({"order": 42}).encode()
    paid = {**herder_headers(body, "d-1"), "X-Herder-Event": "paid"}
    assert api.http.post(hook["url"], content=body, headers=paid).status_code == 201
    for delivery, kind in [("d-2", "paid"), ("d-3", "refunded")]:
        replay = {**paid, "X-Herder-Delivery": delivery, "X-Herder-Event": kind}
        refused = api.http.post(hook["url"], content=body, headers=replay)
        assert refused.status_code == 401, refused.text
        assert "replay" in refused.json()["detail"]
    assert jobs_run(api) == ["ship"]
    retried = {**herder_headers(body, "d-1", at=int(time.time()) + 1), "X-Herder-Event": "paid"}
    again = api.http.post(hook["url"], content=body, headers=retried)  # signed anew: a retry
    assert (again.status_code, again.json()["duplicate"]) == (200, True)
    recorded = sorted((d["delivery_id"], d["status"]) for d in deliveries(api, hook["id"]))
    assert recorded == [
        ("d-1", "accepted"), ("d-1", "duplicate"), ("d-2", "rejected"), ("d-3", "rejected"),
    ]  # fmt: skip


def test_a_v2_signature_binds_the_delivery_id_and_kind(api: Api, jobs: dict[str, str]) -> None:
    hook = make_hook(api, name="orders")
    trigger(api, "ship", "orders.paid", "ship")
    trigger(api, "refund", "orders.refunded", "refund")
    body = json.dumps({"order": 7}).encode()
    now = int(time.time())
    signed = {
        "X-Herder-Signature": signature(SECRET, now, body, delivery="d-1", event="paid"),
        "X-Herder-Delivery": "d-1",
        "X-Herder-Event": "paid",
    }
    assert ",v2=" in signed["X-Herder-Signature"]
    for changed in ({"X-Herder-Event": "refunded"}, {"X-Herder-Delivery": "d-2"}):
        refused = api.http.post(hook["url"], content=body, headers={**signed, **changed})
        assert refused.status_code == 401, refused.text
        assert "does not match" in refused.json()["detail"]
    assert api.http.post(hook["url"], content=body, headers=signed).status_code == 201
    # v2 signs what selects the work, so the same body may come again as another delivery
    later = {
        **signed,
        "X-Herder-Signature": signature(SECRET, now + 1, body, delivery="d-3", event="paid"),
        "X-Herder-Delivery": "d-3",
    }
    assert api.http.post(hook["url"], content=body, headers=later).status_code == 201
    assert jobs_run(api) == ["ship", "ship"]


def test_a_github_body_seen_before_is_a_replay_whatever_its_headers_say(
    api: Api, jobs: dict[str, str]
) -> None:
    hook = make_hook(api, name="github", scheme="github")
    trigger(api, "ship", "github.push", "ship")
    trigger(api, "cleanup", "github.delete", "cleanup")
    body = json.dumps({"ref": "refs/heads/main"}).encode()
    assert (
        api.http.post(hook["url"], content=body, headers=github_headers(body, "g-1")).status_code
        == 201
    )
    for delivery, kind in [("g-2", "push"), ("g-3", "delete")]:
        replay = api.http.post(
            hook["url"], content=body, headers=github_headers(body, delivery, kind)
        )
        assert replay.status_code == 401, replay.text
        assert "replay" in replay.json()["detail"]
    assert jobs_run(api) == ["ship"]


def rate_limited_tenant(api: Api, burst: int) -> None:
    clock = ManualClock(datetime.now(UTC))  # never moves: no token comes back
    api.http.app.state.submit_limiter = SubmitLimiter(  # type: ignore[attr-defined]
        api.store.submit_buckets, api.store.access.tenant_quotas, clock=clock
    )
    quotas = {"submit_rate_per_second": 0.001, "submit_burst": burst}
    patched = api.http.patch(
        f"/v1/tenants/{api.tenant_id}", headers=api.admin, json={"quotas": quotas}
    )
    assert patched.status_code == 200, patched.text


def test_garbage_posted_to_a_hook_spends_none_of_its_tenants_submission_rate(
    api: Api, jobs: dict[str, str]
) -> None:
    rate_limited_tenant(api, burst=4)
    hook = make_hook(api, name="orders")
    trigger(api, "ship", "orders", "ship")
    body = b"{}"
    for number in range(10):
        garbage = {"X-Herder-Signature": "t=1,v1=00", "X-Herder-Delivery": f"x-{number}"}
        assert api.http.post(hook["url"], content=body, headers=garbage).status_code == 401
    for _ in range(3):
        api.start_run(jobs["ship"])  # the tenant's own operator: 3 of its burst of 4
    signed = api.http.post(hook["url"], content=body, headers=herder_headers(body, "d-1"))
    assert signed.status_code == 201, signed.text  # the 4th: a verified delivery is charged
    over = api.http.post(f"/v1/jobs/{jobs['ship']}/runs", headers=api.admin, json={})
    assert over.status_code == 429


def test_unverified_deliveries_are_bounded_per_hook_and_the_senders_still_pass(
    api: Api, jobs: dict[str, str]
) -> None:
    clock = ManualClock(datetime.now(UTC))
    api.http.app.state.hook_rates = HookRates(clock)  # type: ignore[attr-defined]
    hook = make_hook(api, name="orders")
    other = make_hook(api, name="other")
    trigger(api, "ship", "orders", "ship")
    body = b"{}"
    garbage = {"X-Herder-Signature": "t=1,v1=00", "X-Herder-Delivery": "x"}
    answers = [
        api.http.post(hook["url"], content=body, headers=garbage)
        for _ in range(UNVERIFIED_BURST + 5)
    ]
    assert [answer.status_code for answer in answers] == [401] * UNVERIFIED_BURST + [429] * 5
    assert "Retry-After" in answers[-1].headers
    assert len(deliveries(api, hook["id"])) == UNVERIFIED_BURST  # the bound, not every request
    signed = api.http.post(hook["url"], content=body, headers=herder_headers(body, "d-1"))
    assert signed.status_code == 201, signed.text
    assert api.http.post(other["url"], content=body, headers=garbage).status_code == 401
    clock.advance(1 / UNVERIFIED_PER_SECOND)
    assert api.http.post(hook["url"], content=body, headers=garbage).status_code == 401


def test_refused_deliveries_are_kept_a_day_and_accepted_ones_as_long_as_events(
    api: Api, jobs: dict[str, str]
) -> None:
    hook = make_hook(api, name="orders")
    body = b"{}"
    assert (
        api.http.post(hook["url"], content=body, headers={"X-Herder-Delivery": "x"}).status_code
        == 401
    )
    assert (
        api.http.post(hook["url"], content=body, headers=herder_headers(body, "d-1")).status_code
        == 201
    )
    later = ManualClock(datetime.now(UTC) + timedelta(hours=25))
    HookRepository(api.store.database, later, None).prune()
    assert [d["status"] for d in deliveries(api, hook["id"])] == ["accepted"]


async def post_raw(api: Api, url: str, headers: list[tuple[bytes, bytes]]) -> httpx.Response:
    """As a client on the wire sends it: the test client re-encodes a header's bytes as UTF-8,
    where a real server reads each byte as one Latin-1 character ("²" is one)."""
    transport = httpx.ASGITransport(app=api.http.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        return await client.post(url, content=b"{}", headers=headers)


@pytest.mark.parametrize(
    "header",
    ["t=²,v1=00", "t=1²,v1=00", "t=¹²³,v1=00", "t={now},v1=0²", "t=1,v2=²"],
)  # a parameter's id is the same in every xdist worker: the time goes in when it runs
def test_a_signature_header_of_unicode_digits_is_a_401_not_a_500(api: Api, header: str) -> None:
    hook = make_hook(api, name="orders")
    signature = header.format(now=int(time.time())).encode("latin-1")
    raw = [(b"X-Herder-Signature", signature), (b"X-Herder-Delivery", b"d-1")]
    sent = asyncio.run(post_raw(api, hook["url"], raw))
    assert sent.status_code == 401, sent.text
    assert sent.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize(
    "repeated",
    ["X-Herder-Signature", "X-Herder-Delivery", "X-Herder-Event", "X-Hub-Signature-256",
     "X-GitHub-Delivery", "X-GitHub-Event", "Stripe-Signature"],
)  # fmt: skip
def test_a_header_that_signs_or_selects_a_delivery_given_twice_is_refused(
    api: Api, jobs: dict[str, str], repeated: str
) -> None:
    hook = make_hook(api, name="orders")
    trigger(api, "ship", "orders.paid", "ship")
    body = b"{}"
    signed = {**herder_headers(body, "d-1"), "X-Herder-Event": "paid"}
    twice = [(repeated, "t=1,v1=00")] if repeated in signed else [(repeated, "a"), (repeated, "b")]
    headers = [*twice, *signed.items()]  # the last of each is what today's server read
    sent = api.http.post(hook["url"], content=body, headers=headers)
    assert sent.status_code == 401, sent.text
    assert "twice" in sent.json()["detail"]
    assert runs(api) == []


def test_a_replay_that_raced_its_first_past_the_look_is_refused_by_the_unique_key(
    api: Api, jobs: dict[str, str]
) -> None:
    hook = make_hook(api, name="orders")
    trigger(api, "ship", "orders", "ship")
    rates = HookRates(api.store.clock)
    body = json.dumps({"order": 1}).encode()
    signed = herder_headers(body, "d-1")
    replayed = {**signed, "X-Herder-Delivery": "d-2"}
    # both look before either is accepted, as two requests at once would: the replay waits
    # past its look (where it is charged) until the first is accepted
    replay_looked, first_accepted = threading.Event(), threading.Event()
    refused: list[Exception] = []

    def receive(headers: dict[str, str], admit: Callable[[str, int], None]) -> ReceivedEvent:
        return receive_delivery(api.store, rates, hook["id"], headers.items(), lambda: body, admit)

    def replay_charged(tenant_id: str, submissions: int) -> None:
        replay_looked.set()
        assert first_accepted.wait(timeout=30)

    def send_replay() -> None:
        try:
            receive(replayed, replay_charged)
        except Unauthorized as error:
            refused.append(error)

    replay = threading.Thread(target=send_replay)
    replay.start()
    assert replay_looked.wait(timeout=30)
    assert receive(signed, lambda tenant_id, submissions: None).duplicate is False
    first_accepted.set()
    replay.join(timeout=30)
    assert len(refused) == 1
    assert isinstance(refused[0], Replayed)
    assert "replay" in str(refused[0])
    assert jobs_run(api) == ["ship"]
    recorded = sorted((d["delivery_id"], d["status"]) for d in deliveries(api, hook["id"]))
    assert recorded == [("d-1", "accepted"), ("d-2", "rejected")]
