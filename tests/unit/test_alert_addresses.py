"""Where a channel sends, checked by kind: what each kind takes (in its one spelling) and what
it refuses — header injection, a crowd of recipients, a Slack URL over plain HTTP — and how a
Slack URL is shown without its token; the relay and dashboard settings likewise."""

from __future__ import annotations

import pytest

from herder.domain.alerts.addresses import (
    MAX_RECIPIENTS,
    ChannelKind,
    checked_address,
    masked_url,
)
from herder.domain.alerts.outbound import parse_dashboard_url, parse_relay

SLACK = "https://hooks.slack.com/services/T0001/B0002/abcdefSECRET"

TAKEN = [
    (ChannelKind.EMAIL, "mailto:ops@example.com", "mailto:ops@example.com"),
    (ChannelKind.EMAIL, "ops@Example.COM, on+call@x.io", "mailto:ops@example.com,on+call@x.io"),
    (ChannelKind.EMAIL, "MAILTO:a@x.io,a@x.io", "mailto:a@x.io"),
    (ChannelKind.SLACK, SLACK, SLACK),
    (ChannelKind.SLACK, "https://chat.example.com/hooks/xyz", "https://chat.example.com/hooks/xyz"),
    (ChannelKind.WEBHOOK, "https://hooks.example.com", "https://hooks.example.com/"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "given", "kept"), TAKEN)
def test_each_kind_takes_its_address_in_one_spelling(
    kind: ChannelKind, given: str, kept: str
) -> None:
    assert checked_address(kind, given) == kept


REFUSED = [
    (ChannelKind.EMAIL, "mailto:ops@example.com\r\nBcc: all@example.com", "control character"),
    (ChannelKind.EMAIL, "ops@example.com\nSubject: hi", "control character"),
    (ChannelKind.EMAIL, "Ops <ops@example.com>", "not a plain email address"),
    (ChannelKind.EMAIL, '"a,b"@example.com', "not a plain email address"),
    (ChannelKind.EMAIL, "ops%40evil.com@example.com", "not a plain email address"),
    (ChannelKind.EMAIL, "mailto:ops@example.com?bcc=all@example.com", "query"),
    (ChannelKind.EMAIL, "mailto:", "names no recipient"),
    (ChannelKind.EMAIL, "ops@", "not a plain email address"),
    (ChannelKind.EMAIL, "a..b@example.com", "not a plain email address"),
    (ChannelKind.EMAIL, "x" * 65 + "@example.com", "longer than 64"),
    (ChannelKind.EMAIL, ",".join(f"p{n}@x.io" for n in range(MAX_RECIPIENTS + 1)), "at most 20"),
    (ChannelKind.SLACK, "http://hooks.slack.com/services/T/B/x", "https"),
    (ChannelKind.SLACK, "https://user:pw@hooks.slack.com/services/T/B/x", "no user or password"),
    (ChannelKind.SLACK, "https://hooks.slack.com/", "names no webhook"),
    (ChannelKind.SLACK, "mailto:ops@example.com", "https"),
    (ChannelKind.WEBHOOK, "ftp://hooks.example.com/x", "URL scheme"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "given", "said"), REFUSED)
def test_each_kind_refuses_what_could_mislead_it_saying_why(
    kind: ChannelKind, given: str, said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        checked_address(kind, given)


def test_a_slack_url_is_shown_without_its_token() -> None:
    assert masked_url(SLACK) == "https://hooks.slack.com/services/T0001/B0002/…"
    assert "SECRET" not in masked_url(SLACK + "?x=SECRET")
    assert (
        masked_url("https://chat.example.com:8443/hooks/k")
        == "https://chat.example.com:8443/hooks/…"
    )


def test_a_relay_speaks_tls_and_never_sends_a_password_in_plain_text() -> None:
    url = "smtp://alerts%40example.com:p%3Ass@mail.example.com"
    relay = parse_relay(url, "herder@example.com", allow_plain=False)
    assert (relay.host, relay.port, relay.username, relay.password) == (
        "mail.example.com", 587, "alerts@example.com", "p:ss",
    )  # fmt: skip
    assert not relay.plain
    assert not relay.implicit_tls
    assert "p:ss" not in repr(relay)
    assert parse_relay("smtps://mail.example.com", "h@example.com", allow_plain=True).port == 465
    assert parse_relay("smtp://localhost:25", "h@example.com", allow_plain=True).plain
    with pytest.raises(ValueError, match="password in plain text"):
        parse_relay("smtp://u:p@localhost:25", "h@example.com", allow_plain=True)
    with pytest.raises(ValueError, match="HERDER_SMTP_FROM"):
        parse_relay("smtp://mail.example.com", None, allow_plain=False)
    with pytest.raises(ValueError, match="HERDER_SMTP_FROM"):
        parse_relay("smtp://mail.example.com", "x@example.com\r\nBcc: y@z", allow_plain=False)
    with pytest.raises(ValueError, match="HERDER_SMTP_URL"):
        parse_relay("http://mail.example.com", "h@example.com", allow_plain=False)


def test_the_dashboard_url_is_a_base_that_links_append_to() -> None:
    assert parse_dashboard_url("https://herder.example.com") == "https://herder.example.com/"
    assert parse_dashboard_url("https://h.example.com/ui/#/x") == "https://h.example.com/ui/"
    with pytest.raises(ValueError, match="HERDER_DASHBOARD_URL"):
        parse_dashboard_url("javascript:alert(1)")
