"""Inbound webhooks (docs/events.md): a URL a tenant's developer hands to another system,
whose deliveries become events once their signature verifies.

Three signature schemes:

- ``herder``: ``X-Herder-Signature: t=<unix>,v1=<hex>,v2=<hex>`` (what Herder's own alert
  webhooks send, ``domain.alerts.webhooks``), with ``X-Herder-Delivery`` (required) and
  ``X-Herder-Event`` (optional, appended to the name). ``v2`` signs the time, the delivery
  id, the event and the body; ``v1`` only the time and the body. With a ``v2`` given, only
  ``v2`` is checked.
- ``github``: ``X-Hub-Signature-256: sha256=<hex>`` of the body, ``X-GitHub-Delivery``,
  ``X-GitHub-Event`` (appended: ``github.push``). GitHub signs no time, delivery id or kind.
- ``stripe``: ``Stripe-Signature: t=<unix>,v1=<hex>[,v1=…]`` of ``"<t>.<body>"``; the
  delivery id is the payload's ``id``, the kind its ``type`` (``stripe.invoice.paid``).

Replays: a signed time more than ``TOLERANCE_SECONDS`` from now is refused, so a captured
delivery cannot be sent later; within it — and for GitHub at any time — a delivery whose
signed time and body (``Verified.signed_digest``) a hook accepted before is refused whatever
its unsigned headers say (``store.hooks``), and a delivery id accepted before starts nothing.
A header that signs or selects a delivery is refused given twice (``single_headers``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, assert_never

from pydantic import BaseModel, ConfigDict, Field

from herder.domain.alerts.webhooks import sign, v1_message, v2_message
from herder.domain.errors import Unauthorized
from herder.domain.events import EventName, check_depth, is_event_name
from herder.domain.models import _Record

TOLERANCE_SECONDS = 300
MIN_SECRET_CHARS = 16
MAX_SECRET_CHARS = 256
MAX_DELIVERY_ID_CHARS = 128
DEFAULT_RATE_PER_SECOND = 50.0
DEFAULT_BURST = 200
UNVERIFIED_PER_SECOND = 0.2  # refused deliveries a hook answers 401 and records, per process
UNVERIFIED_BURST = 20
REFUSED_RETENTION_HOURS = 24  # a refused delivery's record; accepted ones stay as events do
Secret = Annotated[
    str,
    Field(min_length=MIN_SECRET_CHARS, max_length=MAX_SECRET_CHARS, pattern=r"^[\x21-\x7e]+$"),
]
HookName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_.\-]*$")]


class HookScheme(StrEnum):
    HERDER = "herder"
    GITHUB = "github"
    STRIPE = "stripe"


class HookSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    scheme: HookScheme = HookScheme.HERDER
    event: EventName | None = Field(
        default=None,
        description="the name its events get (default: the hook's name), with the delivery's "
        "kind appended where the scheme sends one: github.push",
    )
    rate_per_second: Annotated[float, Field(gt=0, le=10_000)] = DEFAULT_RATE_PER_SECOND
    burst: Annotated[int, Field(ge=1, le=100_000)] = DEFAULT_BURST
    enabled: bool = True


class HookRequest(HookSpec):
    name: HookName
    secret: Secret | None = Field(
        default=None,
        description="the signing secret the sender holds (Stripe's whsec_…); "
        "without it Herder makes one and shows it once",
    )  # fmt: skip


class SecretChange(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    secret: Secret | None = Field(
        default=None, description="the sender's new secret; without it Herder makes one"
    )


class Hook(_Record):
    id: str
    name: str
    scheme: HookScheme
    event: str
    rate_per_second: float
    burst: int
    enabled: bool
    url: str = Field(
        description="where the sender posts: /v1/hooks/{tenant id}.{id} (its tenant named, so an "
        "edge routes it to its cell; /v1/hooks/{id} is taken too)"
    )
    created_at: datetime
    updated_at: datetime
    version: int


class CreatedHook(Hook):
    secret: str = Field(description="the signing secret: shown this once only")


class DeliveryStatus(StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"


class Delivery(_Record):
    """One inbound request to a hook, recorded without its body."""

    id: str
    hook_id: str
    delivery_id: str | None
    status: DeliveryStatus
    http_status: int
    reason: str | None
    event_id: str | None
    received_at: datetime


class Unverified(Exception):
    """Why a delivery is refused (401): said to the sender and recorded."""


class Replayed(Unauthorized):
    """A delivery whose signed time and body its hook accepted before (401)."""

    def __init__(self) -> None:
        super().__init__(
            "this signed body was accepted before: a replay starts nothing, whatever its "
            "delivery id or kind"
        )


class Malformed(Exception):
    """A delivery whose signature verified but whose body or names cannot be an event."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Verified:
    delivery_id: str
    signed_at: int | None  # unix seconds the sender signed, where the scheme signs a time
    kind: str | None  # appended to the hook's event name
    payload: Any
    signed_digest: str  # SHA-256 of the signed time and body: accepted twice, a replay


SIGNING_HEADERS = frozenset({
    "x-herder-signature", "x-herder-delivery", "x-herder-event",
    "x-hub-signature-256", "x-hub-signature", "x-github-delivery", "x-github-event",
    "stripe-signature",
})  # fmt: skip


def single_headers(raw: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A request's headers keyed in lower case; ``Unverified`` when one that signs or selects
    a delivery comes twice: a proxy that reads the first and this server the last would
    judge two different deliveries."""
    headers: dict[str, str] = {}
    for name, value in raw:
        key = name.lower()
        if key in headers and key in SIGNING_HEADERS:
            raise Unverified(f"the header {key} is given twice: send each signing header once")
        headers[key] = value
    return headers


def verify(
    scheme: HookScheme, secret: str, headers: Mapping[str, str], body: bytes, now: datetime
) -> Verified:
    """The delivery if its signature verifies under ``secret`` within the time tolerance,
    else ``Unverified`` (then ``Malformed`` for a signed body that is not a JSON event).
    ``headers`` are keyed in lower case."""
    signed_at: int | None
    match scheme:
        case HookScheme.HERDER:
            delivery, kind = headers.get("x-herder-delivery"), headers.get("x-herder-event")
            signed_at = _herder_signature(
                headers.get("x-herder-signature"), secret, delivery, kind, body, now
            )
            payload = _json(body)
        case HookScheme.GITHUB:
            _github_signature(headers.get("x-hub-signature-256"), secret, body)
            signed_at = None
            delivery, kind = headers.get("x-github-delivery"), headers.get("x-github-event")
            payload = _json(body)
        case HookScheme.STRIPE:
            stamped = _stamped(headers.get("stripe-signature"))
            _match(secret, v1_message(stamped.at, body), stamped.signatures("v1"))
            signed_at = _in_time(stamped.at, now)
            payload = _json(body)
            delivery = _text(payload, "id")
            kind = _text(payload, "type")
        case _:
            assert_never(scheme)
    if not delivery or len(delivery) > MAX_DELIVERY_ID_CHARS or not delivery.isprintable():
        raise Malformed("the delivery has no usable delivery id", field="delivery_id")
    if kind is not None and not is_event_name(kind):
        raise Malformed(f"the delivery's kind {kind[:64]!r} is not an event name", field="kind")
    signed = body if signed_at is None else v1_message(signed_at, body)
    return Verified(delivery, signed_at, kind, payload, hashlib.sha256(signed).hexdigest())


_DELIVERY_HEADERS = {HookScheme.HERDER: "x-herder-delivery", HookScheme.GITHUB: "x-github-delivery"}


def claimed_delivery(scheme: HookScheme, headers: Mapping[str, str]) -> str | None:
    """The delivery id a request's headers claim, before anything is verified: recorded
    with a refusal so it can be matched with the sender's log (Stripe's is in the body)."""
    header = _DELIVERY_HEADERS.get(scheme)
    claimed = headers.get(header) if header else None
    return claimed[:MAX_DELIVERY_ID_CHARS] if claimed and claimed.isprintable() else None


def is_replay(first_signed_at: int | None, signed_at: int | None) -> bool:
    """A delivery id seen before is a replay when signed at the same time as the first (for
    GitHub, which signs no time: always); signed anew, it is the sender trying again after
    a lost answer — a duplicate, answered as the first was, starting nothing either way."""
    return first_signed_at == signed_at


def event_name(base: str, kind: str | None) -> str:
    """The event's name: the hook's, with the delivery's kind appended."""
    return base if kind is None else f"{base}.{kind}"[:128]


_UNIX_SECONDS = re.compile(r"[0-9]{1,12}")  # ASCII only: str.isdigit() takes "²" too
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class _Stamped:
    """A ``t=<unix>,v1=<hex>[,v2=<hex>…]`` header (Stripe's shape, Herder's too), parsed."""

    at: int
    parts: tuple[tuple[str, str], ...]

    def signatures(self, version: str) -> list[str]:
        return [value for key, value in self.parts if key == version]


def _stamped(header: str | None) -> _Stamped:
    if not header:
        raise Unverified("no signature header")
    split = (part.partition("=") for part in header.split(","))
    parts = tuple((key.strip(), value.strip()) for key, _, value in split)
    stamps = [value for key, value in parts if key == "t"]
    if len(stamps) != 1 or not _UNIX_SECONDS.fullmatch(stamps[0]):
        raise Unverified("the signature header is not t=<unix seconds>,v1=<hex>")
    return _Stamped(int(stamps[0]), parts)


def _herder_signature(
    header: str | None, secret: str, delivery: str | None, kind: str | None, body: bytes,
    now: datetime,
) -> int:  # fmt: skip
    """The signed time, where ``v2`` (if given, else ``v1``) matches."""
    stamped = _stamped(header)
    if stamped.signatures("v2"):
        try:
            message = v2_message(stamped.at, delivery or "", kind, body)
        except UnicodeEncodeError:
            raise Unverified("a delivery id or event that HTTP cannot carry") from None
        _match(secret, message, stamped.signatures("v2"))
    else:
        _match(secret, v1_message(stamped.at, body), stamped.signatures("v1"))
    return _in_time(stamped.at, now)


def _match(secret: str, message: bytes, signatures: list[str]) -> None:
    """``Unverified`` unless one of ``signatures`` is the message's."""
    expected = sign(secret, message)
    if not any(
        _HEX_DIGEST.fullmatch(signature) and hmac.compare_digest(expected, signature)
        for signature in signatures
    ):
        raise Unverified("the signature does not match the body")


def _in_time(timestamp: int, now: datetime) -> int:
    age = now.timestamp() - timestamp
    if abs(age) > TOLERANCE_SECONDS:
        raise Unverified(
            f"signed {abs(age):.0f} s {'ago' if age > 0 else 'ahead'}: more than "
            f"{TOLERANCE_SECONDS} s from now (a replay, or a clock far off)"
        )
    return timestamp


def _github_signature(header: str | None, secret: str, body: bytes) -> None:
    if not header:
        raise Unverified("no X-Hub-Signature-256 header")
    scheme, _, signature = header.partition("=")
    if scheme != "sha256":
        raise Unverified("the signature header is not sha256=<hex>")
    _match(secret, body, [signature.strip()])


def _json(body: bytes) -> Any:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        raise Malformed("the body is not JSON", field="body") from None
    try:
        check_depth(payload)
    except ValueError as error:
        raise Malformed(str(error), field="body") from None
    return payload


def _text(payload: Any, name: str) -> str | None:
    found = payload.get(name) if isinstance(payload, dict) else None
    return found if isinstance(found, str) else None


@dataclass
class TokenBucket:
    """A hook's rate in one API process: ``rate`` a second, bursts of ``capacity``."""

    rate: float
    capacity: float
    tokens: float
    at: datetime

    def take(self, now: datetime) -> float:
        """0.0 when a delivery may pass (a token taken), else the seconds until one may."""
        elapsed = max(0.0, (now - self.at).total_seconds())
        self.tokens, self.at = min(self.capacity, self.tokens + elapsed * self.rate), now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


def hook_address(tenant_id: str, hook_id: str) -> str:
    """The path segment a sender posts to: the hook's id after its tenant's, so that an edge
    sends the delivery to the tenant's cell without a lookup (docs/cells.md)."""
    return f"{tenant_id}.{hook_id}"


def parse_hook_address(address: str) -> tuple[str | None, str]:
    """The tenant (None in an address made before cells: the id alone) and the hook's id."""
    tenant_id, dot, hook_id = address.rpartition(".")
    return (tenant_id, hook_id) if dot else (None, address)
