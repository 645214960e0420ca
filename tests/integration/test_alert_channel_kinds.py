"""Email and Slack channels through the API and the CLI: made with ``kind``, shown with their
recipients or a masked Slack URL and no secret, and every hostile address refused with a 422
naming ``url`` — a header smuggled into the recipients, a crowd of them, a Slack URL over plain
HTTP or aimed at a private address — when made and when changed."""

from __future__ import annotations

import dataclasses

import pytest

from tests.integration.conftest import Api, Herder
from tests.integration.test_alerts_api import fields
from tests.integration.test_cli_runs import ok

SLACK = "https://hooks.slack.com/services/T0001/B0002/tokenXYZ"
CROWD = ",".join(f"person{n}@example.com" for n in range(21))
ENORMOUS = "mailto:" + ",".join(f"p{n}@example.com" for n in range(5000))

HOSTILE: list[tuple[str, str]] = [
    ("email", "mailto:ops@example.com\r\nBcc: everyone@example.com"),
    ("email", "mailto:ops@example.com%0d%0aBcc:everyone@example.com"),
    ("email", "ops@example.com\nSubject: free money"),
    ("email", "Ops <ops@example.com>, x@example.com"),
    ("email", "mailto:ops@example.com?bcc=everyone@example.com"),
    ("email", CROWD),
    ("email", ENORMOUS),
    ("email", "https://hooks.example.com/x"),
    ("slack", "http://hooks.slack.com/services/T/B/x"),
    ("slack", "https://127.0.0.1/services/T/B/x"),
    ("slack", "https://169.254.169.254/latest/meta-data"),
    ("slack", "https://localhost:8080/services/T/B/x"),
    ("slack", "https://[::1]/services/T/B/x"),
    ("slack", "mailto:ops@example.com"),
]


@pytest.fixture
def strict(api: Api) -> Api:
    """The server refuses private alert targets, as a PostgreSQL deployment does by default."""
    settings = api.http.app.state.settings  # type: ignore[attr-defined]
    api.http.app.state.settings = dataclasses.replace(settings, alert_private_targets=False)  # type: ignore[attr-defined]
    return api


@pytest.mark.parametrize(("kind", "url"), HOSTILE)
def test_a_hostile_address_is_refused_naming_url(strict: Api, kind: str, url: str) -> None:
    body = {"name": "x", "kind": kind, "url": url}
    response = strict.http.post("/v1/alert-channels", headers=strict.admin, json=body)
    assert fields(response) == ["url"]
    assert response.json()["detail"].startswith("url")


def test_email_and_slack_channels_show_where_they_send_and_no_secret(strict: Api) -> None:
    body = {"name": "mail", "kind": "email", "url": "ops@Example.com, oncall@example.com"}
    mail = strict.http.post("/v1/alert-channels", headers=strict.admin, json=body)
    assert mail.status_code == 201, mail.text
    assert mail.json()["kind"] == "email"
    assert mail.json()["url"] == "mailto:ops@example.com,oncall@example.com"
    assert mail.json()["secret"] is None
    body = {"name": "team", "kind": "slack", "url": SLACK}
    slack = strict.http.post("/v1/alert-channels", headers=strict.admin, json=body)
    assert slack.status_code == 201, slack.text
    assert slack.json()["url"] == "https://hooks.slack.com/services/T0001/B0002/…"
    assert slack.json()["secret"] is None
    listed = strict.http.get("/v1/alert-channels", headers=strict.admin)
    assert "tokenXYZ" not in listed.text
    test = strict.http.post(f"/v1/alert-channels/{slack.json()['id']}/test", headers=strict.admin)
    assert test.status_code == 202


def test_a_changed_address_is_checked_against_the_channels_kind(strict: Api) -> None:
    body = {"name": "mail", "kind": "email", "url": "mailto:ops@example.com"}
    mail = strict.http.post("/v1/alert-channels", headers=strict.admin, json=body).json()
    body = {"name": "team", "kind": "slack", "url": SLACK}
    slack = strict.http.post("/v1/alert-channels", headers=strict.admin, json=body).json()
    for channel, url in [
        (mail, "mailto:ops@example.com\r\nBcc: x@example.com"),
        (mail, CROWD),
        (mail, SLACK),
        (slack, "http://hooks.slack.com/services/T/B/x"),
        (slack, "https://10.0.0.1/services/T/B/x"),
    ]:
        path = f"/v1/alert-channels/{channel['id']}"
        response = strict.http.patch(path, headers=strict.admin, json={"url": url})
        assert fields(response) == ["url"], url
    changed = strict.http.patch(
        f"/v1/alert-channels/{slack['id']}", headers=strict.admin,
        json={"url": "https://hooks.slack.com/services/T0001/B0009/other"},
    )  # fmt: skip
    assert changed.status_code == 200, changed.text
    assert changed.json()["url"] == "https://hooks.slack.com/services/T0001/B0009/…"
    renamed = strict.http.patch(
        f"/v1/alert-channels/{mail['id']}", headers=strict.admin, json={"url": "a@example.com"}
    )
    assert renamed.json()["url"] == "mailto:a@example.com"


def test_the_cli_makes_email_and_slack_channels(herder: Herder) -> None:
    made = ok(
        herder("alert", "channel", "create", "mail", "mailto:ops@example.com", "--kind", "email")
    )
    assert "created email alert channel ach_" in made
    assert "sending to mailto:ops@example.com" in made
    assert "secret" not in made
    made = ok(herder("alert", "channel", "create", "team", SLACK, "--kind", "slack"))
    assert "https://hooks.slack.com/services/T0001/B0002/…" in made
    assert "tokenXYZ" not in made
    listing = ok(herder("alert", "channel", "list"))
    (mail_row,) = [line for line in listing.splitlines() if "mailto:ops@example.com" in line]
    assert " email " in mail_row
    refused = herder(
        "alert", "channel", "create", "bad", "http://hooks.slack.com/x", "--kind", "slack"
    )
    assert refused.exit_code != 0
    assert "url: a Slack incoming webhook is an https URL" in str(refused.exception)
