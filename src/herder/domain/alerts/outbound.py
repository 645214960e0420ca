"""How a cell reaches people, as its operator configures it: the SMTP relay email channels
send through, the dashboard's address that messages link back to, and the authorities their
TLS connections trust besides the system's (``docs/configuration.md``, "Notifications").

Parsed once at start, so a wrong setting stops the process saying which, rather than failing
every delivery later. A relay speaks TLS — implicit (``smtps://``) or by STARTTLS
(``smtp://``) — unless the operator allows plain text for a relay on the same host or
network; a password is never sent in plain text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from herder.domain.alerts.addresses import email_address

SUBMISSION_PORT = 587  # smtp:// (STARTTLS), RFC 6409
IMPLICIT_TLS_PORT = 465  # smtps://, RFC 8314


@dataclass(frozen=True)
class SmtpRelay:
    host: str
    port: int
    sender: str  # the From address
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    implicit_tls: bool = False  # smtps://: TLS from the first byte; else STARTTLS
    plain: bool = False  # no TLS at all: the operator allowed it for a local relay

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Outbound:
    relay: SmtpRelay | None = None  # None: email channels' deliveries fail, saying so
    dashboard_url: str | None = None  # None: messages name ids and link nowhere
    ca_file: Path | None = None  # trusted besides the system's authorities


def parse_relay(url: str, sender: str | None, *, allow_plain: bool) -> SmtpRelay:
    """``smtp://user:password@host:587`` (user and password percent-encoded) or
    ``smtps://…:465``; ``ValueError`` naming the setting at fault."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("smtp", "smtps") or not parts.hostname:
        raise ValueError("HERDER_SMTP_URL is smtp://[user:password@]host[:port] or smtps://…")
    if not sender:
        raise ValueError("HERDER_SMTP_FROM (the address alerts are sent from) is not set")
    try:
        checked_sender = email_address(sender)
    except ValueError as error:
        raise ValueError(f"HERDER_SMTP_FROM: {error}") from error
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    plain = allow_plain and scheme == "smtp"
    if plain and password is not None:
        raise ValueError(
            "HERDER_SMTP_PLAIN_ALLOWED would send the relay's password in plain text: a relay "
            "that needs one must speak TLS"
        )
    try:
        port = parts.port
    except ValueError as error:
        raise ValueError(f"HERDER_SMTP_URL: {error}") from error
    return SmtpRelay(
        host=parts.hostname,
        port=port or (IMPLICIT_TLS_PORT if scheme == "smtps" else SUBMISSION_PORT),
        sender=checked_sender,
        username=username,
        password=password,
        implicit_tls=scheme == "smtps",
        plain=plain,
    )


def parse_dashboard_url(url: str) -> str:
    """The dashboard's base address, ending in ``/``; ``ValueError`` unless http(s)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("HERDER_DASHBOARD_URL is the dashboard's http(s) address")
    return url.split("#", 1)[0].rstrip("/") + "/"
