"""How a webhook is signed, when a failed one is tried again, and which targets it may reach.

The signature follows Stripe's shape: ``X-Herder-Signature: t=<unix seconds>,v1=<hex>,v2=<hex>``,
HMAC-SHA256 under the channel's secret of ``"<t>.<body>"`` (``v1``) and of
``"<t>\n<delivery id>\n<event>\n<body>"`` (``v2``). A receiver that checks the time refuses
a delivery captured and sent later; one that checks ``v2`` also knows the delivery id and the
event were the sender's (``v1`` leaves them to whoever sends the body on), and a receiver that
reads only ``v1`` still can (it ignores a version it does not know, as Stripe's do).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import random
from datetime import datetime, timedelta

SIGNATURE_HEADER = "X-Herder-Signature"
DELIVERY_HEADER = "X-Herder-Delivery"  # the delivery's id: the same on every retry of it
EVENT_HEADER = "X-Herder-Event"
MAX_ATTEMPTS = 8
FIRST_DELAY_SECONDS = 5.0
MAX_DELAY_SECONDS = 600.0


def signature(
    secret: str,
    timestamp: int,
    body: bytes,
    *,
    delivery: str | None = None,
    event: str | None = None,
) -> str:
    """The signature header's value for this body sent at ``timestamp`` (unix seconds), with
    ``v2`` too when the ``delivery`` id is given (and the ``event`` header, if one is sent)."""
    header = f"t={timestamp},v1={sign(secret, v1_message(timestamp, body))}"
    if delivery is None:
        return header
    return f"{header},v2={sign(secret, v2_message(timestamp, delivery, event, body))}"


def v1_message(timestamp: int, body: bytes) -> bytes:
    return str(timestamp).encode() + b"." + body


def v2_message(timestamp: int, delivery: str, event: str | None, body: bytes) -> bytes:
    """What ``v2`` signs: the headers as sent (Latin-1, as HTTP carries them), one a line —
    no delivery id or event name holds a line break, so no two deliveries sign the same."""
    headers = f"{timestamp}\n{delivery}\n{event or ''}\n"
    return headers.encode("latin-1") + body


def sign(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def retry_at(attempts: int, now: datetime, rng: random.Random) -> datetime | None:
    """When to try again after ``attempts`` failed ones: exponential from 5 s, capped, with
    jitter (half to all of the delay) so receivers coming back are not hit all at once;
    ``None`` when no attempt is left."""
    if attempts >= MAX_ATTEMPTS:
        return None
    delay = min(MAX_DELAY_SECONDS, FIRST_DELAY_SECONDS * 2 ** (attempts - 1))
    return now + timedelta(seconds=delay * rng.uniform(0.5, 1.0))


def is_private_address(address: str) -> bool:
    """Loopback, private, link-local (cloud metadata), multicast, reserved or unspecified:
    places a webhook must not reach unless the server allows it."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global


def is_private_host(host: str) -> bool | None:
    """Whether a literal host is private; ``None`` for a name only resolving can judge."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return is_private_address(name)
    except ValueError:
        return None
