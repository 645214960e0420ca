"""The alerts API: channels and rules per tenant, their checks (422 naming the field), other
tenants' objects (404), the test delivery, incidents and deliveries listed and paged."""

from __future__ import annotations

import dataclasses
import json
import threading
import time

import pytest
from httpx import Response

from herder.control import alerts as alert_loops
from herder.control.scheduler import Scheduler
from herder.domain.alerts.rules import ChannelRequest
from herder.store.notifications import ALERTS_CHANNEL
from herder.store.store import Store
from tests.conftest import TEST_KEYRING
from tests.integration.conftest import Api, Herder
from tests.integration.webhook_receiver import running_receiver

HOOK = "https://hooks.example.com/herder"
PROBE = "probe"  # a notice payload the store never sends


def fields(response: Response) -> list[str]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return [error["field"] for error in response.json()["errors"]]


def channel(
    api: Api, name: str = "ops", url: str = HOOK, headers: dict[str, str] | None = None
) -> dict[str, object]:
    response = api.http.post(
        "/v1/alert-channels", headers=headers or api.admin, json={"name": name, "url": url}
    )
    assert response.status_code == 201, response.text
    body: dict[str, object] = response.json()
    return body


def rule_body(channel_id: object, **more: object) -> dict[str, object]:
    return {"name": "failures", "kind": "run_failed", "channel_ids": [channel_id], **more}


def test_a_channel_shows_its_secret_once_and_is_listed_changed_and_deleted(api: Api) -> None:
    created = channel(api)
    assert str(created["secret"]).startswith("whsec_")
    read = api.http.get(f"/v1/alert-channels/{created['id']}", headers=api.admin).json()
    assert "secret" not in read
    assert read["url"] == HOOK
    for name in ("b", "c"):
        channel(api, name)
    first = api.http.get("/v1/alert-channels?limit=2", headers=api.admin).json()
    rest = api.http.get(
        f"/v1/alert-channels?limit=2&cursor={first['next_cursor']}", headers=api.admin
    ).json()
    assert [c["name"] for c in first["items"] + rest["items"]] == ["c", "b", "ops"]
    changed = api.http.patch(
        f"/v1/alert-channels/{created['id']}", headers=api.admin, json={"enabled": False}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["enabled"] is False
    duplicate = api.http.post(
        "/v1/alert-channels", headers=api.admin, json={"name": "b", "url": HOOK}
    )
    assert duplicate.status_code == 409
    deleted = api.http.delete(f"/v1/alert-channels/{created['id']}", headers=api.admin)
    assert deleted.status_code == 204
    gone = api.http.get(f"/v1/alert-channels/{created['id']}", headers=api.admin)
    assert gone.status_code == 404


BAD_CHANNELS: list[tuple[dict[str, object], str]] = [
    ({"name": "x", "url": "ftp://hooks.example.com/x"}, "url"),
    ({"name": "x", "url": "not a url"}, "url"),
    ({"name": "x", "url": "https://h.example.com/" + "a" * 3000}, "url"),
    ({"name": "x" * 200, "url": HOOK}, "name"),
    ({"name": "x", "url": HOOK, "kind": "sms"}, "kind"),
    ({"name": "x", "url": HOOK, "kind": "email"}, "url"),
    ({"name": "x", "url": HOOK, "secret": "mine"}, "secret"),
]


def test_bad_channels_are_refused_naming_the_field(api: Api) -> None:
    for body, field in BAD_CHANNELS:
        response = api.http.post("/v1/alert-channels", headers=api.admin, json=body)
        assert fields(response) == [field], body


def test_private_targets_follow_the_servers_setting(api: Api) -> None:
    settings = api.http.app.state.settings  # type: ignore[attr-defined]
    api.http.app.state.settings = dataclasses.replace(settings, alert_private_targets=False)  # type: ignore[attr-defined]
    for url in ("http://127.0.0.1:8080/x", "http://169.254.169.254/latest", "http://localhost/"):
        body = {"name": "inside", "url": url}
        assert fields(api.http.post("/v1/alert-channels", headers=api.admin, json=body)) == ["url"]
    api.http.app.state.settings = dataclasses.replace(settings, alert_private_targets=True)  # type: ignore[attr-defined]
    channel(api, "inside", "http://127.0.0.1:8080/x")


BAD_RULES: list[tuple[dict[str, object], str]] = [
    ({"kind": "disk_full"}, "kind"),
    ({"params": {"consecutive": 0}}, "params.consecutive"),
    ({"params": {"consecutive": 101}}, "params.consecutive"),
    ({"params": {"job_id": "job_01ABCDEFGHJKMNPQRSTVWXYZ00"}}, "params.job_id"),
    ({"params": {"threshold_seconds": 5}}, "params.threshold_seconds"),  # not run_failed's
    ({"kind": "queue_wait_p99"}, "params.threshold_seconds"),  # required by it
    (
        {"kind": "queue_wait_p99", "params": {"threshold_seconds": -1}},
        "params.threshold_seconds",
    ),
    ({"channel_ids": []}, "channel_ids"),
    ({"channel_ids": ["ach_nothere"]}, "channel_ids"),
    ({"kind": "loop_stale"}, "kind"),  # the system tenant's, and this is not it
]


def test_bad_rules_are_refused_naming_the_field(api: Api) -> None:
    tenant = api.as_key(api.other_tenant_key())  # not the system tenant
    channel_id = channel(api, headers=tenant)["id"]
    for change, field in BAD_RULES:
        body = rule_body(channel_id, **change)
        response = api.http.post("/v1/alert-rules", headers=tenant, json=body)
        assert fields(response) == [field], change


def test_a_rule_cannot_name_another_tenants_channel_or_job(api: Api) -> None:
    theirs = channel(api)
    job = api.create_job()
    mine = api.as_key(api.other_tenant_key())
    body = rule_body(theirs["id"], params={"job_id": job["id"]})
    response = api.http.post("/v1/alert-rules", headers=mine, json=body)
    assert sorted(fields(response)) == ["channel_ids", "params.job_id"]


def test_rules_are_made_read_changed_and_deleted(api: Api) -> None:
    own = channel(api)
    job = api.create_job()
    body = rule_body(own["id"], params={"job_id": job["id"], "consecutive": 3})
    created = api.http.post("/v1/alert-rules", headers=api.admin, json=body)
    assert created.status_code == 201, created.text
    rule = created.json()
    assert rule["params"] == {"job_id": job["id"], "consecutive": 3,
                              "outcomes": ["failed", "dead", "timed_out"]}  # fmt: skip
    changed = api.http.patch(
        f"/v1/alert-rules/{rule['id']}", headers=api.admin, json={"params": {"consecutive": 5}}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["params"]["consecutive"] == 5
    bad = api.http.patch(
        f"/v1/alert-rules/{rule['id']}", headers=api.admin, json={"params": {"loop": "x"}}
    )
    assert fields(bad) == ["params.loop"]
    listed = api.http.get("/v1/alert-rules", headers=api.admin).json()
    assert [r["id"] for r in listed["items"]] == [rule["id"]]
    assert api.http.delete(f"/v1/alert-rules/{rule['id']}", headers=api.admin).status_code == 204
    assert api.http.get(f"/v1/alert-rules/{rule['id']}", headers=api.admin).status_code == 404


def test_another_tenants_channels_rules_and_deliveries_answer_404(api: Api) -> None:
    own = channel(api)
    rule = api.http.post("/v1/alert-rules", headers=api.admin, json=rule_body(own["id"])).json()
    intruder = api.as_key(api.other_tenant_key())
    for method, url in [
        ("GET", f"/v1/alert-channels/{own['id']}"),
        ("PATCH", f"/v1/alert-channels/{own['id']}"),
        ("DELETE", f"/v1/alert-channels/{own['id']}"),
        ("POST", f"/v1/alert-channels/{own['id']}/test"),
        ("GET", f"/v1/alert-deliveries?channel_id={own['id']}"),
        ("GET", f"/v1/alert-rules/{rule['id']}"),
        ("PATCH", f"/v1/alert-rules/{rule['id']}"),
        ("DELETE", f"/v1/alert-rules/{rule['id']}"),
    ]:
        json: dict[str, object] | None = {} if method in ("PATCH", "POST") else None
        response = api.http.request(method, url, headers=intruder, json=json)
        assert response.status_code == 404, (method, url, response.text)
    assert api.http.get("/v1/alert-channels", headers=intruder).json()["items"] == []
    assert api.http.get("/v1/alert-rules", headers=intruder).json()["items"] == []


def test_a_test_delivery_is_queued_and_listed(api: Api) -> None:
    own = channel(api)
    queued = api.http.post(f"/v1/alert-channels/{own['id']}/test", headers=api.admin)
    assert queued.status_code == 202, queued.text
    listed = api.http.get(f"/v1/alert-deliveries?channel_id={own['id']}", headers=api.admin)
    (delivery,) = listed.json()["items"]
    assert delivery["id"] == queued.json()["delivery_id"]
    assert (delivery["event"], delivery["state"], delivery["attempts"]) == ("test", "pending", 0)
    assert api.http.get("/v1/alerts", headers=api.admin).json() == {
        "items": [],
        "next_cursor": None,
    }


def test_bad_listing_parameters_answer_422(api: Api) -> None:
    for query in [
        "state=closed",
        "limit=0",
        "limit=5000",
        "cursor=nonsense",
        "rule_id=" + "x" * 50,
    ]:
        assert api.http.get(f"/v1/alerts?{query}", headers=api.admin).status_code == 422, query


def test_the_scheduler_runs_the_alert_loops_under_their_leases(api: Api) -> None:
    scheduler = Scheduler(api.store, heartbeat_timeout_seconds=10, listen=False)
    scheduler.start()
    try:
        deadline = time.monotonic() + 10
        held: set[str] = set()
        while held != {"alerts", "alert-deliveries"} and time.monotonic() < deadline:
            held = {n for n in ("alerts", "alert-deliveries") if api.store.leases.holder(n)}
            time.sleep(0.02)
        assert held == {"alerts", "alert-deliveries"}
    finally:
        scheduler.stop()


@pytest.mark.parametrize("where", ["this process", "another process"])
def test_a_queued_delivery_wakes_the_sender_at_once(
    api: Api, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sender's idle poll is 120 s and its lease is renewed every 100 s here: a test
    delivery that arrives within 20 s was woken for — in the API's process directly, in
    another scheduler process (PostgreSQL) by a NOTIFY its listener hears — however loaded
    the machine."""
    monkeypatch.setattr(alert_loops, "SEND_POLL_SECONDS", 120.0)
    if where == "another process" and not api.store.database.is_postgres:
        pytest.skip("processes share notices on PostgreSQL only")
    # another scheduler opens the channels' secrets with the same keys
    store = (
        api.store
        if where == "this process"
        else Store(api.store.database.url, keyring=TEST_KEYRING)
    )
    scheduler = Scheduler(
        store, heartbeat_timeout_seconds=10, lease_seconds=300,
        listen=store is not api.store, alert_private_targets=True,
    )  # fmt: skip
    listening = threading.Event()

    def heard(_: str, payload: str) -> None:
        if payload == PROBE:
            listening.set()

    store.database.subscribe(heard)
    with running_receiver() as receiver:
        request = ChannelRequest(name="local", url=receiver.url + "/hook")
        channel_id = api.store.alert_channels.create(api.tenant_id, request, allow_private=True).id
        scheduler.start()
        try:
            deadline = time.monotonic() + 5
            while not listening.is_set():  # the listener LISTENs before anything is sent
                assert time.monotonic() < deadline, "the listener never started listening"
                with api.store.database.write() as connection:
                    api.store.database.notify(connection, ALERTS_CHANNEL, PROBE)
                listening.wait(0.05)
            for count in (1, 2):  # the second is queued while the sender idles after the first
                queued = time.monotonic()
                test = api.http.post(f"/v1/alert-channels/{channel_id}/test", headers=api.admin)
                assert test.status_code == 202, test.text
                while len(receiver.requests) < count and time.monotonic() - queued < 20:
                    time.sleep(0.01)
                assert len(receiver.requests) == count
        finally:
            scheduler.stop()
            if store is not api.store:
                store.close()


def test_the_cli_makes_channels_and_rules_and_lists_what_they_did(api: Api, herder: Herder) -> None:
    created = herder("alert", "channel", "create", "ops", HOOK, "--json")
    assert created.exit_code == 0, created.output
    channel_id = json.loads(created.output)["id"]
    assert "whsec_" in created.output
    listed = herder("alert", "channel", "list")
    assert channel_id[: len("ach_") + 8] in listed.output  # its shortest unique start
    assert "whsec_" not in listed.output
    rule = herder(
        "alert", "rule", "create", "failures", "--kind", "run_failed",
        "--channel", channel_id, "--param", "consecutive=3",
    )  # fmt: skip
    assert rule.exit_code == 0, rule.output
    assert '"consecutive": 3' in herder("alert", "rule", "list").output
    bad = herder(
        "alert", "rule", "create", "x", "--kind", "run_failed", "--channel", channel_id,
        "--param", "consecutive=0",
    )  # fmt: skip
    assert bad.exit_code != 0
    assert "params.consecutive" in str(bad.exception)  # main() prints it
    tested = herder("alert", "channel", "test", channel_id)
    assert tested.exit_code == 0, tested.output
    deliveries = herder("alert", "deliveries", "--channel", channel_id, "--json")
    assert json.loads(deliveries.output)["items"][0]["event"] == "test"
    assert herder("alert", "list").exit_code == 0
    assert herder("alert", "channel", "delete", channel_id).exit_code == 0
