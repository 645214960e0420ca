"""A job's notices through the API and the CLI: the caller's own subscription, made of a
channel and rules marked as its (listed, refused by hand), changed in place, removed whole;
a signed-in person's email by default, a key's 422 naming ``to``; another tenant's job 404;
hostile addresses and events 422 naming the field, never a 500."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from herder.app import moves
from herder.domain.models import Role
from herder.domain.moves import MoveState, TenantExport
from herder.domain.sign_in import Person
from herder.store.store import Store
from tests.integration.conftest import Api, Herder
from tests.integration.test_tenant_moves import JOB, _made, _tenant, other_cell  # noqa: F401

ME = "mailto:me@example.com"


def operator(api: Api) -> dict[str, str]:
    return api.as_key(api.store.access.create_api_key(api.tenant_id, Role.OPERATOR, "oncall")[1])


def notices(api: Api, job_id: str, headers: dict[str, str], **body: Any) -> Any:
    return api.http.put(f"/v1/jobs/{job_id}/notices", headers=headers, json=body)


def fields(response: Any) -> list[str]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return [error["field"] for error in response.json()["errors"]]


def test_an_operator_subscribes_changes_and_unsubscribes(api: Api) -> None:
    job_id = api.create_job("nightly")["id"]
    caller = operator(api)
    made = notices(api, job_id, caller, on=["failed", "timed_out", "approval"], to=ME)
    assert made.status_code == 200, made.text
    notice = made.json()
    assert notice["on"] == ["failed", "timed_out", "approval"]
    assert notice["to"] == ME
    assert notice["subscriber"].startswith("user:key_")
    assert len(notice["rule_ids"]) == 3
    assert api.http.get(f"/v1/jobs/{job_id}/notices", headers=caller).json() == notice

    rules = api.http.get("/v1/alert-rules", headers=api.admin).json()["items"]
    assert {rule["kind"] for rule in rules} == {"run_failed", "approval_waiting"}
    assert {rule["managed_by"] for rule in rules} == {notice["id"]}
    assert all(rule["params"]["job_id"] == job_id for rule in rules)
    channel = api.http.get(f"/v1/alert-channels/{notice['channel_id']}", headers=api.admin)
    assert channel.json()["managed_by"] == notice["id"]
    # its parts change only through it
    rule_id = notice["rule_ids"][0]
    for method, path, body in [
        ("PATCH", f"/v1/alert-rules/{rule_id}", {"enabled": False}),
        ("DELETE", f"/v1/alert-rules/{rule_id}", None),
        ("PATCH", f"/v1/alert-channels/{notice['channel_id']}", {"enabled": False}),
        ("DELETE", f"/v1/alert-channels/{notice['channel_id']}", None),
    ]:
        refused = api.http.request(method, path, headers=api.admin, json=body)
        assert refused.status_code == 409, refused.text
        assert "herder job notify" in refused.json()["detail"]

    # changed in place: the same notice, the kept events' rules kept, the channel kept
    changed = notices(api, job_id, caller, on=["failed", "deadline_missed"], to=ME).json()
    assert changed["id"] == notice["id"]
    assert changed["channel_id"] == notice["channel_id"]
    assert len(changed["rule_ids"]) == 2
    failed_rule = next(one for one in rules if one["name"].endswith(".failed"))
    assert failed_rule["id"] in changed["rule_ids"]
    # another person's notices of the same job are theirs
    other = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.ADMIN, "other")[1])
    assert api.http.get(f"/v1/jobs/{job_id}/notices", headers=other).status_code == 404

    gone = api.http.delete(f"/v1/jobs/{job_id}/notices", headers=caller)
    assert gone.status_code == 204, gone.text
    assert api.http.get(f"/v1/jobs/{job_id}/notices", headers=caller).status_code == 404
    assert api.http.delete(f"/v1/jobs/{job_id}/notices", headers=caller).status_code == 404
    assert api.http.get("/v1/alert-rules", headers=api.admin).json()["items"] == []
    assert api.http.get("/v1/alert-channels", headers=api.admin).json()["items"] == []


def test_deleting_a_job_takes_its_notices_with_it(api: Api) -> None:
    job_id = api.create_job("nightly")["id"]
    kept = api.create_job("kept")["id"]
    team = api.http.post(
        "/v1/alert-channels",
        headers=api.admin,
        json={"name": "team", "kind": "email", "url": "mailto:team@example.com"},
    ).json()
    caller = operator(api)
    for to in (ME, "team"):  # its own channel, and a channel of the tenant's by name
        headers = caller if to == ME else api.admin
        assert notices(api, job_id, headers, on=["failed", "approval"], to=to).status_code == 200
    other = notices(api, kept, caller, on=["timed_out"], to=ME).json()

    assert api.http.delete(f"/v1/jobs/{job_id}", headers=api.admin).status_code == 204
    # nothing is left judging a job that is no more, nor refused by hand for good
    rules = api.http.get("/v1/alert-rules", headers=api.admin).json()["items"]
    assert [rule["id"] for rule in rules] == other["rule_ids"]
    channels = api.http.get("/v1/alert-channels", headers=api.admin).json()["items"]
    assert sorted(one["id"] for one in channels) == sorted([team["id"], other["channel_id"]])
    assert api.http.get(f"/v1/jobs/{kept}/notices", headers=caller).json() == other


def test_notices_go_to_a_named_channel_or_a_slack_webhook(api: Api) -> None:
    job_id = api.create_job("nightly")["id"]
    team = api.http.post(
        "/v1/alert-channels",
        headers=api.admin,
        json={"name": "team-mail", "kind": "email", "url": "mailto:team@example.com"},
    ).json()
    named = notices(api, job_id, api.admin, on=["failed"], to="team-mail").json()
    assert (named["channel_id"], named["to"]) == (team["id"], "team-mail")
    slack = "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX"
    sent = notices(api, job_id, api.admin, on=["failed"], to=slack)
    assert sent.status_code == 200, sent.text
    assert sent.json()["to"].startswith("https://hooks.slack.com/services/")
    assert "XXXXXXXXXXXXXXXXXXXXXXXX" not in sent.text  # the webhook's token stays sealed
    api.http.delete(f"/v1/jobs/{job_id}/notices", headers=api.admin)
    # the named channel was the tenant's: it stays
    assert api.http.get(f"/v1/alert-channels/{team['id']}", headers=api.admin).status_code == 200


def test_a_signed_in_person_is_told_at_their_email_and_a_key_must_say_where(api: Api) -> None:
    job_id = api.create_job("nightly")["id"]
    assert fields(notices(api, job_id, operator(api), on=["failed"])) == ["to"]
    person = Person(issuer="https://id.example.com", subject="42", name="ada",
                    email="ada@example.com")  # fmt: skip
    _, token = api.store.users.sign_in(
        person, api.tenant_id, Role.OPERATOR, kind="cli", lifetime=timedelta(hours=1)
    )
    made = notices(api, job_id, api.as_key(token), on=["timed_out"])
    assert made.status_code == 200, made.text
    assert made.json()["to"] == "mailto:ada@example.com"
    assert made.json()["subscriber"].startswith("user:usr_")


def test_a_viewer_reads_but_may_not_subscribe(api: Api) -> None:
    job_id = api.create_job("nightly")["id"]
    viewer = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.VIEWER, "v")[1])
    assert notices(api, job_id, viewer, on=["failed"], to=ME).status_code == 403
    assert api.http.get(f"/v1/jobs/{job_id}/notices", headers=viewer).status_code == 404


def test_another_tenants_job_answers_404(api: Api) -> None:
    job_id = api.create_job("nightly")["id"]
    assert notices(api, job_id, api.admin, on=["failed"], to=ME).status_code == 200
    intruder = api.as_key(api.other_tenant_key())
    for method, body in [("PUT", {"on": ["failed"], "to": ME}), ("GET", None), ("DELETE", None)]:
        response = api.http.request(
            method, f"/v1/jobs/{job_id}/notices", headers=intruder, json=body
        )
        assert response.status_code == 404, response.text
        assert "nightly" not in response.text
    assert api.http.get(f"/v1/jobs/{job_id}/notices", headers=api.admin).status_code == 200


HOSTILE_ADDRESSES = [
    "mailto:me@example.com\r\nBcc: all@example.com",
    "me@example.com\nSubject: hi",
    "mailto:me@example.com,you@example.com",
    "mailto:me@example.com?cc=boss@example.com",
    '"Me" <me@example.com>',
    "me%boss@example.com",
    "@",
    "http://hooks.slack.com/services/T0/B0/x",
    "https://user:pw@hooks.slack.com/services/T0/B0/x",
    "javascript:alert(1)",
    "ftp://example.com/x",
    "<script>alert(1)</script>",
    "no such channel",
    "missing-channel",
    "a\x00b",
    "\ud800",
    "x" * 3000,
    "",
    " ",
]


def test_hostile_addresses_are_refused_naming_to(api: Api) -> None:
    job_id = api.create_job("nightly")["id"]
    for to in HOSTILE_ADDRESSES:
        response = api.http.put(
            f"/v1/jobs/{job_id}/notices",
            headers={**api.admin, "content-type": "application/json"},
            content=json.dumps({"on": ["failed"], "to": to}).encode(),
        )
        assert response.status_code == 422, (to, response.text)
        assert fields(response) == ["to"], to
    assert api.http.get("/v1/alert-channels", headers=api.admin).json()["items"] == []
    assert api.http.get(f"/v1/jobs/{job_id}/notices", headers=api.admin).status_code == 404


BAD_BODIES: list[tuple[dict[str, Any], str]] = [
    ({"on": ["everything"], "to": ME}, "on.0"),
    ({"on": [], "to": ME}, "on"),
    ({"on": "failed", "to": ME}, "on"),
    ({"on": ["failed"] * 5, "to": ME}, "on"),
    ({"to": ME}, "on"),
    ({"on": ["failed"], "to": ME, "rules": []}, "rules"),
    ({"on": ["failed"], "to": 7}, "to"),
    ({"on": [None], "to": ME}, "on.0"),
]


def test_bad_events_are_refused_naming_the_field(api: Api) -> None:
    job_id = api.create_job("nightly")["id"]
    for body, field in BAD_BODIES:
        assert field in fields(notices(api, job_id, api.admin, **body)), body
    assert api.http.put(f"/v1/jobs/{job_id}/notices", headers=api.admin, json=[]).status_code == 422
    long_id = api.http.put("/v1/jobs/" + "j" * 5000 + "/notices", headers=api.admin,
                           json={"on": ["failed"], "to": ME})  # fmt: skip
    assert long_id.status_code in (404, 414), long_id.text


def test_a_subscription_to_a_private_slack_address_is_refused_where_private_targets_are(
    api: Api,
) -> None:
    state = api.http.app.state  # type: ignore[attr-defined]
    state.settings = replace(state.settings, alert_private_targets=False)
    job_id = api.create_job("nightly")["id"]
    response = notices(api, job_id, api.admin, on=["failed"], to="https://127.0.0.1/hook")
    assert fields(response) == ["to"]


def test_herder_job_notify_subscribes_shows_and_stops(api: Api, herder: Herder) -> None:
    api.create_job("nightly")
    made = herder("job", "notify", "nightly", "--on", "failed,deadline_missed", "--to", ME)
    assert made.exit_code == 0, (made.output, made.exception)
    assert "failed,deadline_missed" in made.output
    assert ME in made.output
    shown = herder("job", "notify", "nightly", "--json")
    assert shown.exit_code == 0, (shown.output, shown.exception)
    assert json.loads(shown.output)["on"] == ["failed", "deadline_missed"]
    listed = herder("alert", "rule", "list")
    assert "notice.jnt_" in listed.output
    refused = herder("job", "notify", "nightly", "--on", "failed", "--to", "a@b.com\r\nBcc: c@d")
    assert refused.exit_code != 0
    assert "to" in str(refused.exception)
    assert herder("job", "notify", "nightly", "--off", "--on", "failed").exit_code != 0
    off = herder("job", "notify", "nightly", "--off")
    assert off.exit_code == 0, (off.output, off.exception)
    assert herder("job", "notify", "nightly").exit_code != 0  # none left: 404


def test_a_tenants_move_takes_its_notices_with_their_channel_and_rules(
    api: Api,
    other_cell: Store,  # noqa: F811
) -> None:
    tenant_id, auth = _tenant(api)
    job = _made(api.http.post("/v1/jobs", headers=auth, json=JOB))
    notice = _made(notices(api, job["id"], auth, on=["failed", "approval"], to=ME))
    moves.shift(api.store, tenant_id, MoveState.FROZEN, "b")
    exported = api.http.get(f"/v1/tenants/{tenant_id}/export", headers=api.admin).json()
    moves.import_tenant(other_cell, TenantExport.model_validate({**exported, "from_cell": "a"}))
    moves.shift(other_cell, tenant_id, None, None)
    moved = other_cell.job_notices.get(tenant_id, job["id"], notice["subscriber"])
    assert moved.model_dump(mode="json") == notice
    rules = other_cell.alert_rules.list(tenant_id).items
    assert {rule.managed_by for rule in rules} == {notice["id"]}
