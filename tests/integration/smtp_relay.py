"""A real SMTP relay on 127.0.0.1 for the email channels' tests (aiosmtpd): STARTTLS with a
certificate the test made, required before AUTH and before mail, one login it accepts, and
every message it took kept as received."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.system.conftest import free_port

USER, PASSWORD = "alerts", "s3cret pass"


@dataclass(frozen=True)
class Received:
    sender: str
    recipients: list[str]
    email: EmailMessage


@dataclass
class Relay:
    port: int
    received: list[Received] = field(default_factory=list)
    logins: list[str] = field(default_factory=list)  # each login tried, accepted or not


class _Inbox:
    def __init__(self, relay: Relay) -> None:
        self._relay = relay

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.content
        assert isinstance(content, bytes)
        email = message_from_bytes(content, policy=policy.default)
        sender = str(envelope.mail_from)
        self._relay.received.append(Received(sender, list(envelope.rcpt_tos), email))
        return "250 OK"


@contextmanager
def running_relay(certificate: Path, key: Path) -> Iterator[Relay]:
    """A relay on 127.0.0.1 offering STARTTLS with ``certificate``, and AUTH only after it."""
    relay = Relay(port=free_port())
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(certificate, key)

    def authenticator(
        server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if not isinstance(data, LoginPassword):
            return AuthResult(success=False, handled=False)
        relay.logins.append(data.login.decode())
        accepted = (data.login, data.password) == (USER.encode(), PASSWORD.encode())
        return AuthResult(success=accepted, handled=False)  # aiosmtpd answers 235 or 535

    controller = Controller(
        _Inbox(relay), hostname="127.0.0.1", port=relay.port, tls_context=tls,
        require_starttls=True, auth_require_tls=True, auth_required=True,
        authenticator=authenticator,
    )  # fmt: skip
    controller.start()
    try:
        yield relay
    finally:
        controller.stop()
