"""Handing an email to the cell's SMTP relay: TLS first (implicit, or STARTTLS, which the
relay must offer unless the operator allowed plain text), then the login, then the message.

The whole attempt is cut at ``TOTAL_SECONDS``, so a relay that trickles its answers holds
no other delivery up past it. A refusal is recorded with the relay's own code and words: a
person reading the delivery log sees "535 authentication failed", not a class name.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Sequence
from email.message import EmailMessage

import aiosmtplib

from herder.domain.alerts.outbound import SmtpRelay
from herder.store.alerts.deliveries import AttemptOutcome

TOTAL_SECONDS = 15.0
ACCEPTED = 250  # SMTP's "requested action completed": the status recorded for a delivery


async def send_email(
    relay: SmtpRelay, email: EmailMessage, recipients: Sequence[str], tls: ssl.SSLContext
) -> AttemptOutcome:
    smtp = aiosmtplib.SMTP(
        hostname=relay.host, port=relay.port, use_tls=relay.implicit_tls, start_tls=False,
        tls_context=tls, timeout=TOTAL_SECONDS,
    )  # fmt: skip
    transport: asyncio.BaseTransport | None = None
    try:
        async with asyncio.timeout(TOTAL_SECONDS):
            await smtp.connect()
            try:
                return await _hand_over(smtp, relay, email, recipients, tls)
            finally:
                transport = smtp.transport  # after STARTTLS, TLS's over the socket's
                with contextlib.suppress(aiosmtplib.SMTPException, OSError):
                    await smtp.quit()
    except aiosmtplib.SMTPRecipientsRefused as refused:
        return AttemptOutcome(None, "the relay refused every recipient: " + _each(refused))
    except aiosmtplib.SMTPResponseException as error:
        return AttemptOutcome(error.code, f"the relay answered {error.code} {error.message}")
    except aiosmtplib.SMTPTimeoutError:
        return AttemptOutcome(None, f"the relay {relay.where} did not answer in time")
    except TimeoutError:
        return AttemptOutcome(None, f"the relay {relay.where} took over {TOTAL_SECONDS:g}s")
    except (aiosmtplib.SMTPException, OSError) as error:  # connection refused, TLS, …
        return AttemptOutcome(None, f"could not reach the relay {relay.where}: {error}"[:500])
    finally:
        transport = transport or smtp.transport
        smtp.close()
        if isinstance(transport, asyncio.Transport):
            # closed, not said goodbye to: TLS's goodbye would want turns of a loop that ends
            # with this send, leaving the socket's own transport open
            transport.abort()
        await asyncio.sleep(0)  # the socket closes on the next turn: before the loop does


async def _hand_over(
    smtp: aiosmtplib.SMTP,
    relay: SmtpRelay,
    email: EmailMessage,
    recipients: Sequence[str],
    tls: ssl.SSLContext,
) -> AttemptOutcome:
    if not relay.implicit_tls and not relay.plain:
        await smtp.ehlo()
        if not smtp.supports_extension("starttls"):
            return AttemptOutcome(
                None,
                f"the relay {relay.where} does not offer STARTTLS; Herder sends no mail in "
                "plain text unless HERDER_SMTP_PLAIN_ALLOWED=1 (a relay on this host)",
            )
        await smtp.starttls(tls_context=tls)
    if relay.username is not None:
        await smtp.login(relay.username, relay.password or "")
    refused, _ = await smtp.send_message(email, sender=relay.sender, recipients=list(recipients))
    if refused:
        said = ", ".join(
            f"{who} ({answer.code} {answer.message})" for who, answer in refused.items()
        )
        return AttemptOutcome(ACCEPTED, f"sent; the relay refused some recipients: {said}"[:500])
    return AttemptOutcome(ACCEPTED, None)


def _each(refused: aiosmtplib.SMTPRecipientsRefused) -> str:
    return ", ".join(f"{one.recipient} ({one.code} {one.message})" for one in refused.recipients)[
        :400
    ]
