"""A message in Slack's incoming-webhook format: ``text`` (what a notification shows) and
``blocks`` — a header, a section per notice with its facts as fields, the rest counted, and a
button back to the dashboard.

Slack reads ``&``, ``<`` and ``>`` in ``mrkdwn`` as markup (``<!channel>`` pings everyone,
``<https://…|here>`` is a link), so every value a tenant chose is escaped as Slack asks; the
header is ``plain_text``. Slack's limits are kept: a header's 150 characters, a field's
2,000, ten fields a section, fifty blocks.
"""

from __future__ import annotations

from typing import Any

from herder.domain.alerts.messages import Message

MAX_HEADER_LENGTH = 150
MAX_FIELD_LENGTH = 2000
MAX_FIELDS = 10


def slack_payload(message: Message) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": _plain(_cut(message.subject, MAX_HEADER_LENGTH))}
    ]
    for one in message.notices:
        section: dict[str, Any] = {
            "type": "section",
            "text": _mrkdwn(f"*{one.event}*: {escape(one.headline)}"),
        }
        if one.facts:
            section["fields"] = [
                _mrkdwn(f"*{escape(name)}*\n{escape(value)}") for name, value in one.facts
            ][:MAX_FIELDS]
        if one.link and message.total > 1:
            section["accessory"] = _button(one.link_label, one.link)
        blocks.append(section)
    if message.more:
        blocks.append({"type": "context", "elements": [_mrkdwn(f"… and {message.more} more")]})
    if message.link:
        label = "Open alerts" if message.total > 1 else message.notices[0].link_label
        blocks.append({"type": "actions", "elements": [_button(label, message.link)]})
    return {"text": escape(message.subject), "blocks": blocks}


def escape(text: str) -> str:
    """Slack's three control characters, as its formatting guide says to send them."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _button(label: str, url: str) -> dict[str, Any]:
    return {"type": "button", "text": _plain(label), "url": url}


def _plain(text: str) -> dict[str, str]:
    return {"type": "plain_text", "text": text}


def _mrkdwn(text: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": _cut(text, MAX_FIELD_LENGTH)}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
