"""A message as an email: plain text with an HTML alternative, from the relay's sender to
the channel's recipients.

Every value that reaches a header went through ``addresses`` (recipients, sender) or
``messages._line`` (the subject: one line), and the standard library's header policy refuses
a line break besides, so no name a tenant chose can add a header. ``Auto-Submitted`` keeps
vacation responders from answering an alert (RFC 3834).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime

from herder.domain.alerts.messages import Message, text_body


def email_message(
    message: Message,
    *,
    sender: str,
    recipients: Sequence[str],
    message_id: str,
    now: datetime,
) -> EmailMessage:
    email = EmailMessage()
    email["From"] = sender
    email["To"] = ", ".join(recipients)
    email["Subject"] = message.subject
    email["Date"] = format_datetime(now)
    email["Message-ID"] = f"<{message_id}@{sender.rsplit('@', 1)[1]}>"
    email["Auto-Submitted"] = "auto-generated"
    email.set_content(text_body(message))
    email.add_alternative(html_body(message), subtype="html")
    return email


def html_body(message: Message) -> str:
    """The same as the text body, every value escaped."""
    parts = [f"<h2>{html.escape(message.subject)}</h2>"]
    for one in message.notices:
        parts.append(f"<p><strong>{html.escape(one.event)}</strong>: {html.escape(one.headline)}")
        parts += [f"<br>{html.escape(name)}: {html.escape(value)}" for name, value in one.facts]
        if one.link:
            parts.append(
                f'<br><a href="{html.escape(one.link, quote=True)}">'
                f"{html.escape(one.link_label)}</a>"
            )
        parts.append("</p>")
    if message.more:
        parts.append(f"<p>… and {message.more} more.</p>")
    if message.link and message.total > 1:
        parts.append(f'<p><a href="{html.escape(message.link, quote=True)}">Every alert</a></p>')
    parts.append("<p><small>Sent by Herder's alerts.</small></p>")
    return "<!doctype html><html><body>" + "".join(parts) + "</body></html>\n"
