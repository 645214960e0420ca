"""Where a channel sends, by its kind: a webhook's URL, an email channel's recipients
(``mailto:a@example.com,b@example.com``), a Slack incoming webhook's URL.

Checked when a channel is made or changed, so that nothing a tenant types can add a header to
an email (no line break, no second address hidden in a display name), send to more than
``MAX_RECIPIENTS`` people, or send a Slack webhook — whose URL is its credential — over plain
HTTP. A Slack URL is shown masked (``masked_url``): the full one is kept sealed, like a
webhook's signing secret.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AnyUrl, Field, TypeAdapter, UrlConstraints, ValidationError

MAX_URL_LENGTH = 2048
MAX_RECIPIENTS = 20
MAX_EMAIL_LENGTH = 254  # RFC 5321's path limit, less its angle brackets
MAX_LOCAL_PART_LENGTH = 64
MAILTO = "mailto:"

# A dot-atom local part (RFC 5322) without quoting or "%", and a host of DNS labels: nothing
# that a mail header or a mailto: URL would read as anything but one address.
_ATOM = r"[A-Za-z0-9!#$&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_EMAIL = re.compile(rf"{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ChannelKind(StrEnum):
    WEBHOOK = "webhook"  # a signed JSON POST (``webhooks.py``)
    EMAIL = "email"  # a message through the cell's SMTP relay
    SLACK = "slack"  # Slack's incoming-webhook format (``slack.py``)


PEOPLE_KINDS = frozenset({ChannelKind.EMAIL, ChannelKind.SLACK})
"""Kinds read by people: their deliveries are grouped into messages and rate-limited."""

_WEBHOOK_URL = TypeAdapter(
    Annotated[
        AnyUrl,
        UrlConstraints(
            max_length=MAX_URL_LENGTH, allowed_schemes=["http", "https"], host_required=True
        ),
    ]
)
_SLACK_URL = TypeAdapter(
    Annotated[
        AnyUrl,
        UrlConstraints(max_length=MAX_URL_LENGTH, allowed_schemes=["https"], host_required=True),
    ]
)

ChannelAddress = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_URL_LENGTH,
        description="webhook: the http(s) URL POSTed to; email: mailto:a@example.com,b@… "
        f"(at most {MAX_RECIPIENTS} recipients); slack: the https incoming-webhook URL "
        "(shown masked once made)",
    ),
]


def checked_address(kind: ChannelKind, address: str) -> str:
    """The address in its one spelling, or ``ValueError`` saying what is wrong with it."""
    if _CONTROL.search(address):
        raise ValueError("holds a line break or another control character")
    match kind:
        case ChannelKind.WEBHOOK:
            return _url(_WEBHOOK_URL, address)
        case ChannelKind.EMAIL:
            return MAILTO + ",".join(recipients(address))
        case ChannelKind.SLACK:
            return _slack_url(address)


def recipients(address: str) -> list[str]:
    """The addresses of ``mailto:a@x,b@y`` (the ``mailto:`` may be left out), each checked,
    repeats dropped; ``ValueError`` for anything else."""
    listed = address.strip()
    if listed[: len(MAILTO)].lower() == MAILTO:
        listed = listed[len(MAILTO) :]
    if "?" in listed:
        raise ValueError("a mailto: query (?subject=…, ?cc=…) is not taken: list addresses only")
    found: list[str] = []
    for item in (one.strip() for one in listed.split(",")):
        if item and item not in found:
            found.append(_email(item))
    if not found:
        raise ValueError("names no recipient: give mailto:someone@example.com")
    if len(found) > MAX_RECIPIENTS:
        raise ValueError(f"names {len(found)} recipients; at most {MAX_RECIPIENTS}")
    return found


def email_address(text: str) -> str:
    """One plain address (a sender's), checked as a recipient's is."""
    if _CONTROL.search(text):
        raise ValueError("holds a line break or another control character")
    return _email(text.strip())


def _email(item: str) -> str:
    if len(item) > MAX_EMAIL_LENGTH or not _EMAIL.fullmatch(item):
        shown = item if len(item) <= 80 else item[:80] + "…"
        raise ValueError(
            f"{shown!r} is not a plain email address (name@example.com: no display name, "
            "quotes, spaces, percent-encoding or a second address)"
        )
    local, host = item.rsplit("@", 1)
    if len(local) > MAX_LOCAL_PART_LENGTH:
        raise ValueError(f"{item[:80]!r} has a local part longer than 64 characters")
    return f"{local}@{host.lower()}"


def _slack_url(address: str) -> str:
    if urlsplit(address.strip()).scheme.lower() != "https":
        raise ValueError("a Slack incoming webhook is an https URL (https://hooks.slack.com/…)")
    url = _url(_SLACK_URL, address)
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ValueError("a Slack incoming webhook URL carries no user or password")
    if not parts.path.strip("/"):
        raise ValueError("names no webhook: Slack's URL has a path (/services/T…/B…/…)")
    return url


def _url(adapter: TypeAdapter[AnyUrl], address: str) -> str:
    try:
        return str(adapter.validate_python(address.strip()))
    except ValidationError as error:
        raise ValueError(error.errors()[0]["msg"]) from error


def masked_url(url: str) -> str:
    """A Slack URL as it is shown: its last path segment (the token) and any query hidden,
    so a viewer sees which workspace and channel it posts to, and cannot post there."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    folder = parts.path.rstrip("/").rsplit("/", 1)[0]
    return f"{parts.scheme}://{netloc}{folder}/…"
