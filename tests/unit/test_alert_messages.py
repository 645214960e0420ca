"""What people are told: one delivery told whole with a link to its run, a burst told as one
message that counts and names a few, a channel paced to a few messages a minute, and the
same words as Slack blocks (tenant text escaped) and as an email (no header to inject)."""

from __future__ import annotations

import email.policy
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from typing import Any

import pytest

from herder.domain.alerts.email import email_message
from herder.domain.alerts.messages import (
    MESSAGES_PER_MINUTE,
    NAMED_PER_MESSAGE,
    compose,
    next_message_at,
    text_body,
)
from herder.domain.alerts.slack import slack_payload

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
DASHBOARD = "https://herder.example.com/"


def opened(job: str, run: str, name: str = "nightly") -> dict[str, Any]:
    return {
        "event": "opened", "tenant_id": "ten_1",
        "rule": {"id": "alr_1", "name": "failures", "kind": "run_failed"},
        "incident": {
            "id": "inc_1", "key": job, "state": "open",
            "summary": f"job {name} failed 1 times in a row (last: {run} failed)",
            "details": {"run_ids": [run], "state": "failed"},
            "opened_at": NOW.isoformat(), "resolved_at": None,
        },
    }  # fmt: skip


def test_one_delivery_is_told_whole_and_links_to_its_run() -> None:
    message = compose([opened("job_1", "run_9")], DASHBOARD)
    assert (
        message.subject
        == "[herder] opened: job nightly failed 1 times in a row (last: run_9 failed)"
    )
    assert message.link == "https://herder.example.com/#/runs/run_9"
    body = text_body(message)
    assert "Rule: failures (run_failed)" in body
    assert "Open the run: https://herder.example.com/#/runs/run_9" in body


LINKS = [
    ({"key": "run_5", "details": {}}, "#/runs/run_5"),
    ({"key": "wfrun_5", "details": {}}, "#/workflow-runs/wfrun_5"),
    ({"key": "run_5", "details": {"workflow_run_id": "wfrun_2"}}, "#/workflow-runs/wfrun_2"),
    ({"key": "wf_1", "details": {"run_ids": ["wfrun_3"]}}, "#/workflow-runs/wfrun_3"),
    ({"key": "sch_1", "details": {}}, "#/schedules/sch_1"),
    ({"key": "job_1", "details": {}}, "#/jobs/job_1"),
    ({"key": "queue", "details": {}}, "#/alerts"),
]


@pytest.mark.parametrize(("incident", "path"), LINKS)
def test_a_notice_links_to_what_it_is_about(incident: dict[str, Any], path: str) -> None:
    payload = {"event": "opened", "rule": {}, "incident": {"summary": "s", **incident}}
    assert compose([payload], DASHBOARD).link == DASHBOARD + path


def test_a_resolved_notice_leads_with_what_cleared_it() -> None:
    payload = opened("job_1", "run_1")
    payload["event"] = "resolved"
    payload["incident"] |= {"recovery": "job nightly recovered: run_2 succeeded"}
    message = compose([payload], DASHBOARD)
    assert message.subject == "[herder] resolved: job nightly recovered: run_2 succeeded"
    assert ("Was", "job nightly failed 1 times in a row (last: run_1 failed)") in (
        message.notices[0].facts
    )


def test_without_a_dashboard_url_nothing_links() -> None:
    message = compose([opened("job_1", "run_9")], None)
    assert message.link is None
    assert "http" not in text_body(message)


def test_a_burst_is_one_message_counting_all_and_naming_a_few() -> None:
    burst = [opened(f"job_{n}", f"run_{n}", f"job-{n}") for n in range(500)]
    message = compose(burst, DASHBOARD)
    assert message.subject == "[herder] 500 alerts (500 opened)"
    assert (message.total, len(message.notices), message.more) == (500, NAMED_PER_MESSAGE, 495)
    body = text_body(message)
    assert "job job-0 failed" in body
    assert "job job-4 failed" in body
    assert "job-5 " not in body
    assert "… and 495 more." in body
    assert "Every alert: https://herder.example.com/#/alerts" in body


def test_a_name_cannot_break_a_line_or_the_subject() -> None:
    payload = opened("job_1", "run_1", "x\r\nBcc: everyone@example.com")
    message = compose([payload], DASHBOARD)
    assert "\n" not in message.subject
    assert "\r" not in message.subject
    mail = email_message(
        message, sender="herder@example.com", recipients=["ops@example.com"],
        message_id="msg_1", now=NOW,
    )  # fmt: skip
    parsed = message_from_bytes(
        mail.as_bytes(policy=email.policy.SMTP), policy=email.policy.default
    )
    assert parsed["Bcc"] is None
    assert parsed["To"] == "ops@example.com"
    assert parsed["Auto-Submitted"] == "auto-generated"
    assert parsed["Message-ID"] == "<msg_1@example.com>"


def test_an_email_has_text_and_html_each_escaped() -> None:
    payload = opened("job_1", "run_1", "<script>alert(1)</script>")
    mail = email_message(
        compose([payload], DASHBOARD), sender="herder@example.com",
        recipients=["a@example.com", "b@example.com"], message_id="msg_1", now=NOW,
    )  # fmt: skip
    assert mail["To"] == "a@example.com, b@example.com"
    text = mail.get_body(("plain",))
    html = mail.get_body(("html",))
    assert text is not None
    assert html is not None
    assert "<script>alert(1)</script>" in text.get_content()
    assert "<script>" not in html.get_content()
    assert 'href="https://herder.example.com/#/runs/run_1"' in html.get_content()


def test_slack_gets_blocks_with_a_header_facts_and_a_button_and_no_markup_from_names() -> None:
    payload = opened("job_1", "run_1", "<!channel> & <https://evil.example|click>")
    body = slack_payload(compose([payload], DASHBOARD))
    header, section, actions = body["blocks"]
    assert header["type"] == "header"
    assert header["text"]["type"] == "plain_text"
    assert "<!channel>" not in section["text"]["text"]
    assert "&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;" in section["text"]["text"]
    assert {"type": "mrkdwn", "text": "*Rule*\nfailures (run_failed)"} in section["fields"]
    (button,) = actions["elements"]
    assert button == {
        "type": "button", "text": {"type": "plain_text", "text": "Open the run"},
        "url": "https://herder.example.com/#/runs/run_1",
    }  # fmt: skip
    assert "<!channel>" not in body["text"]


def test_a_slack_burst_names_a_few_and_counts_the_rest() -> None:
    burst = [opened(f"job_{n}", f"run_{n}") for n in range(40)]
    blocks = slack_payload(compose(burst, DASHBOARD))["blocks"]
    assert [block["type"] for block in blocks] == (
        ["header"] + ["section"] * NAMED_PER_MESSAGE + ["context", "actions"]
    )
    assert blocks[-2]["elements"][0]["text"] == "… and 35 more"
    assert len(blocks[0]["text"]["text"]) <= 150


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


PACE = [
    ([], NOW),
    ([ago(s) for s in (1, 2, 3, 4)], NOW),
    ([ago(s) for s in (1, 2, 3, 4, 50)], ago(50) + timedelta(minutes=1)),
    ([ago(s) for s in (1, 2, 3, 4, 5, 50)], ago(5) + timedelta(minutes=1)),
    ([ago(s) for s in (1, 2, 3, 4, 61)], NOW),  # one left the window
]


@pytest.mark.parametrize(("sent", "expected"), PACE)
def test_a_channel_sends_at_most_its_pace_a_minute(
    sent: list[datetime], expected: datetime
) -> None:
    assert MESSAGES_PER_MINUTE == 5
    assert next_message_at(sent, NOW) == expected
