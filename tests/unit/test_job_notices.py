"""A job's notices, decided purely: where ``to`` sends (one address, a Slack webhook, a
channel's name; anything else refused saying why), the rule each event becomes, which runs
were stopped at the 24-hour limit, and the dashboard's checkboxes naming every event."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from herder.domain.alerts import messages
from herder.domain.alerts.addresses import ChannelKind
from herder.domain.alerts.notices import (
    NoticeEvent,
    Target,
    at_the_limit,
    limit_notice,
    rule_of,
    target_of,
)
from herder.domain.alerts.rules import PARAMS_OF_KIND, RuleKind, RuleParams
from herder.domain.jobs import MAX_TIMEOUT_SECONDS

SLACK = "https://hooks.slack.com/services/T0/B0/abc"
FAILED, TIMED_OUT = ["failed", "dead"], ["timed_out"]
JOB_NOTICES_JS = (
    Path(__file__).resolve().parents[2] / "src/herder/api/dashboard/static/views/job_notices.js"
)


@pytest.mark.parametrize(
    ("to", "target"),
    [
        ("me@example.com", Target(kind=ChannelKind.EMAIL, url="mailto:me@example.com")),
        ("MAILTO:me@example.com", Target(kind=ChannelKind.EMAIL, url="mailto:me@example.com")),
        (" mailto:me@example.com ", Target(kind=ChannelKind.EMAIL, url="mailto:me@example.com")),
        (SLACK, Target(kind=ChannelKind.SLACK, url=SLACK)),
        ("team-mail", Target(kind=None, channel="team-mail")),
        ("notice.jnt_01ABC", Target(kind=None, channel="notice.jnt_01ABC")),
    ],
)
def test_where_to_sends(to: str, target: Target) -> None:
    assert target_of(to) == target


@pytest.mark.parametrize(
    ("to", "says"),
    [
        ("a@example.com,b@example.com", "one address"),
        ("mailto:a@example.com?cc=b@example.com", "query"),
        ("a@example.com\r\nBcc: b@example.com", "line break"),
        ('"A" <a@example.com>', "not a plain email address"),
        ("http://hooks.slack.com/services/x", "an https URL"),
        ("ftp://example.com", "an https URL"),
        ("no spaces please", "channel's name"),
        ("<script>", "channel's name"),
        ("", "channel's name"),
        ("x" * 200, "channel's name"),
    ],
)
def test_what_to_refuses(to: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        target_of(to)


@pytest.mark.parametrize(
    ("event", "kind", "params"),
    [
        (NoticeEvent.FAILED, RuleKind.RUN_FAILED, {"job_id": "job_1", "outcomes": FAILED}),
        (NoticeEvent.TIMED_OUT, RuleKind.RUN_FAILED, {"job_id": "job_1", "outcomes": TIMED_OUT}),
        (NoticeEvent.DEADLINE_MISSED, RuleKind.DEADLINE_MISSED, {"job_id": "job_1"}),
        (NoticeEvent.APPROVAL, RuleKind.APPROVAL_WAITING, {"job_id": "job_1"}),
    ],
)  # fmt: skip
def test_each_event_is_a_rule_of_an_existing_kind(
    event: NoticeEvent, kind: RuleKind, params: dict[str, object]
) -> None:
    assert rule_of(event, "job_1") == (kind, params)
    checked = RuleParams.model_validate(params)
    assert checked.check_for(kind) == []
    assert set(params) <= PARAMS_OF_KIND[kind]


@pytest.mark.parametrize(
    ("timeout", "hit"),
    [(MAX_TIMEOUT_SECONDS, True), (MAX_TIMEOUT_SECONDS - 1, False), (3600, False),
     (None, False), ("86400", False)],
)  # fmt: skip
def test_only_a_run_under_the_maximum_timeout_hit_the_limit(timeout: object, hit: bool) -> None:
    assert at_the_limit(timeout) is hit


def test_the_limit_notice_reads_as_an_incident_linking_to_the_run() -> None:
    now = datetime(2026, 12, 7, 12, tzinfo=UTC)
    payload = limit_notice("ten_1", "run_1", "job_1", "nightly", 2, now)
    notice = messages.notice(payload, "https://herder.example.com/")
    assert (
        notice.headline == "run run_1 of job nightly was stopped at the 24-hour limit (attempt 2)"
    )
    assert notice.link == "https://herder.example.com/#/runs/run_1"


def test_the_dashboard_offers_every_event_in_order() -> None:
    listed = re.findall(r'\["(\w+)", "[^"]+"\]', JOB_NOTICES_JS.read_text())
    assert listed == [event.value for event in NoticeEvent]
