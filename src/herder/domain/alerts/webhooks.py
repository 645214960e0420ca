"""How a webhook is signed, when a failed one is tried again, and which targets it may reach.

The signature follows Stripe's shape: ``X-Herder-Signature: t=<unix seconds>,v1=<hex>``,
where ``v1`` is HMAC-SHA256 of ``"<t>.<body>"`` under the channel's secret; a receiver that
checks the time too refuses a replay.
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


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value for this body sent at ``timestamp`` (unix seconds)."""
    signed = str(timestamp).encode() + b"." + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


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
