"""What an email or Slack channel tells people: its due deliveries as one message, paced.

A burst — a rule opening 500 incidents in one evaluation, a flapping job — must not become
500 emails. So a person's channel sends what is due to it as **one message**, naming the
first ``NAMED_PER_MESSAGE`` and counting the rest, and sends at most ``MESSAGES_PER_MINUTE``
messages in any minute: what comes due past that waits, and goes in the next message
(``next_message_at``). Webhooks are for programs and stay one delivery a request.

A message is plain data here (``compose``); ``email_body`` and ``slack.py`` render it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

MESSAGES_PER_MINUTE = 5
WINDOW = timedelta(minutes=1)
NAMED_PER_MESSAGE = 5
MAX_DELIVERIES_PER_MESSAGE = 1000  # a bigger backlog goes in the messages after
MAX_SUBJECT_LENGTH = 140
MAX_LINE_LENGTH = 500
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass(frozen=True)
class Notice:
    """One delivery in words."""

    event: str  # opened, resolved, test
    headline: str  # "job nightly failed 3 times in a row …"
    facts: tuple[tuple[str, str], ...]  # (label, value), in the order shown
    link: str | None  # where in the dashboard to look; None without a dashboard URL
    link_label: str


@dataclass(frozen=True)
class Message:
    subject: str
    notices: tuple[Notice, ...]  # the first NAMED_PER_MESSAGE
    total: int  # deliveries the message carries
    link: str | None  # the one notice's link, or the alerts page for several

    @property
    def more(self) -> int:
        return self.total - len(self.notices)


def next_message_at(sent: Sequence[datetime], now: datetime) -> datetime:
    """When a channel may send its next message, given when it sent the ones before: now,
    or when the oldest of the last minute's ``MESSAGES_PER_MINUTE`` leaves the window."""
    recent = sorted(moment for moment in sent if moment > now - WINDOW)
    if len(recent) < MESSAGES_PER_MINUTE:
        return now
    return recent[-MESSAGES_PER_MINUTE] + WINDOW


def compose(payloads: Sequence[Mapping[str, Any]], dashboard_url: str | None) -> Message:
    """One message for the deliveries' payloads (oldest first): a single one told whole,
    several counted by event and the first few named."""
    notices = [notice(payload, dashboard_url) for payload in payloads[:NAMED_PER_MESSAGE]]
    if len(payloads) == 1:
        (only,) = notices
        return Message(_subject(f"{only.event}: {only.headline}"), (only,), 1, only.link)
    events = Counter(str(payload.get("event", "")) for payload in payloads)
    counted = ", ".join(f"{count} {event}" for event, count in sorted(events.items()))
    subject = _subject(f"{len(payloads)} alerts ({counted})")
    return Message(subject, tuple(notices), len(payloads), _page(dashboard_url, "alerts"))


def notice(payload: Mapping[str, Any], dashboard_url: str | None) -> Notice:
    """A delivery's payload (``store.alerts.incidents``, or a channel's test) in words."""
    event = str(payload.get("event", ""))
    if event == "test":
        channel = payload.get("channel") or {}
        headline = f"a test of alert channel {channel.get('name', '')}"
        return Notice(event, _line(headline), (), _page(dashboard_url, "alerts"), "Open alerts")
    rule = payload.get("rule") or {}
    incident = payload.get("incident") or {}
    headline = str(incident.get("summary", ""))
    facts = [("Rule", f"{rule.get('name', '')} ({rule.get('kind', '')})")]
    facts.append(("About", str(incident.get("key", ""))))
    if incident.get("recovery"):  # a resolved notice leads with what cleared it
        headline = str(incident["recovery"])
        facts.append(("Was", str(incident.get("summary", ""))))
    facts.append(("Opened", str(incident.get("opened_at", ""))))
    if incident.get("resolved_at"):
        facts.append(("Resolved", str(incident["resolved_at"])))
    path, label = _subject_page(incident)
    return Notice(
        event,
        _line(headline),
        tuple((name, _line(value)) for name, value in facts),
        _page(dashboard_url, path),
        label,
    )


def text_body(message: Message) -> str:
    """The plain-text body: each notice, its facts and link; the rest counted."""
    lines = [message.subject, ""]
    for one in message.notices:
        lines.append(f"* {one.event}: {one.headline}" if message.total > 1 else one.headline)
        lines += [f"  {name}: {value}" for name, value in one.facts]
        if one.link:
            lines.append(f"  {one.link_label}: {one.link}")
        lines.append("")
    if message.more:
        lines.append(f"… and {message.more} more.")
    if message.link and message.total > 1:
        lines.append(f"Every alert: {message.link}")
    lines += ["", "-- ", "Sent by Herder's alerts: change the rule or channel to stop these."]
    return "\n".join(lines) + "\n"


def _subject_page(incident: Mapping[str, Any]) -> tuple[str, str]:
    """Where in the dashboard the incident's subject is: its latest run, its workflow run,
    the run, job or schedule it is about; else the alerts page (the rule)."""
    details = incident.get("details") or {}
    key = str(incident.get("key", ""))
    run_ids = details.get("run_ids") if isinstance(details, Mapping) else None
    latest = str(run_ids[-1]) if isinstance(run_ids, list) and run_ids else None
    workflow_run = details.get("workflow_run_id") if isinstance(details, Mapping) else None
    for candidate in (str(one) for one in (latest, workflow_run, key) if one):
        if candidate.startswith("wfrun_"):
            return f"workflow-runs/{quote(candidate)}", "Open the workflow run"
        if candidate.startswith("run_"):
            return f"runs/{quote(candidate)}", "Open the run"
    for prefix, page, label in (("job_", "jobs", "job"), ("sch_", "schedules", "schedule")):
        if key.startswith(prefix):
            return f"{page}/{quote(key)}", f"Open the {label}"
    return "alerts", "Open alerts"


def _page(dashboard_url: str | None, path: str) -> str | None:
    return None if dashboard_url is None else f"{dashboard_url}#/{path}"


def _line(text: str) -> str:
    """One line of at most ``MAX_LINE_LENGTH``: a name or a summary cannot start a new
    header or paragraph of its own."""
    flat = _CONTROL.sub(" ", text).strip()
    return flat if len(flat) <= MAX_LINE_LENGTH else flat[: MAX_LINE_LENGTH - 1] + "…"


def _subject(text: str) -> str:
    flat = _line(f"[herder] {text}")
    return flat if len(flat) <= MAX_SUBJECT_LENGTH else flat[: MAX_SUBJECT_LENGTH - 1] + "…"
