"""Sending one email or Slack message: its deliveries composed into words
(``domain.alerts.messages``), rendered for its kind, and handed to the relay or posted to
Slack. What cannot be sent — no relay configured, a Slack URL that does not open — is a
failed attempt saying so, retried like any other, so a setting fixed in time still sends it."""

from __future__ import annotations

import ssl
from datetime import datetime
from typing import assert_never

import httpx

from herder.control.slack import post_to_slack
from herder.control.smtp import send_email
from herder.control.webhooks import Resolver
from herder.domain.alerts.addresses import ChannelKind
from herder.domain.alerts.email import email_message
from herder.domain.alerts.messages import compose
from herder.domain.alerts.outbound import Outbound
from herder.domain.alerts.slack import slack_payload
from herder.store.alerts.deliveries import AttemptOutcome
from herder.store.alerts.messages import DueMessage

NO_RELAY = (
    "this process has no SMTP relay to send email through: set HERDER_SMTP_URL and "
    "HERDER_SMTP_FROM where the alert loops run"
)


async def send_message(
    client: httpx.AsyncClient,
    message: DueMessage,
    now: datetime,
    *,
    outbound: Outbound,
    tls: ssl.SSLContext,
    allow_private: bool,
    resolver: Resolver,
) -> AttemptOutcome:
    words = compose([one.payload for one in message.carried], outbound.dashboard_url)
    match message.kind:
        case ChannelKind.EMAIL:
            if outbound.relay is None:
                return AttemptOutcome(None, NO_RELAY)
            email = email_message(
                words, sender=outbound.relay.sender, recipients=message.recipients,
                message_id=message.id, now=now,
            )  # fmt: skip
            return await send_email(outbound.relay, email, message.recipients, tls)
        case ChannelKind.SLACK:
            if message.url is None:
                return AttemptOutcome(None, message.unopened_because)
            return await post_to_slack(
                client, message.url, slack_payload(words),
                allow_private=allow_private, resolver=resolver,
            )  # fmt: skip
        case ChannelKind.WEBHOOK:
            raise ValueError(f"webhook channel {message.channel_id} is posted, not messaged")
        case unknown:
            assert_never(unknown)


def trusted(outbound: Outbound) -> ssl.SSLContext:
    """The authorities a webhook was always checked against (httpx's), and the operator's
    CA file's besides; a file that cannot be used stops the start, saying so."""
    context = httpx.create_ssl_context(trust_env=False)
    if outbound.ca_file is not None:
        try:
            context.load_verify_locations(cafile=str(outbound.ca_file))
        except (OSError, ssl.SSLError) as error:
            raise ValueError(
                f"HERDER_ALERTS_CA_FILE: cannot use {outbound.ca_file}: {error}"
            ) from error
    return context
