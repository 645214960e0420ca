"""Inbound webhooks (docs/events.md): a developer's hooks, and a delivery's way in —
signature and replay (a refusal answered within the hook's bound of refusals, so an anonymous
sender costs its tenant nothing), then the hook's rate and the tenant's, then an event like
any other."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping

from herder.clock import Clock
from herder.domain.errors import Invalid, RateLimited, Unauthorized
from herder.domain.events import ReceivedEvent
from herder.domain.hooks import (
    UNVERIFIED_BURST,
    UNVERIFIED_PER_SECOND,
    CreatedHook,
    Delivery,
    DeliveryStatus,
    Hook,
    HookRequest,
    HookSpec,
    Malformed,
    Replayed,
    TokenBucket,
    Unverified,
    Verified,
    claimed_delivery,
    event_name,
    single_headers,
    verify,
)
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.domain.patches import check_fields, patched
from herder.store.hooks import DeliveryRecord, Receiver
from herder.store.store import Store
from herder.telemetry import metrics

FIELDS = frozenset(HookSpec.model_fields)


def create(store: Store, tenant_id: str, request: HookRequest) -> CreatedHook:
    return store.hooks.create(tenant_id, request)


def list_hooks(store: Store, tenant_id: str, *, page: PageRequest) -> Page[Hook]:
    return store.hooks.list(tenant_id, page=page)


def read(store: Store, tenant_id: str, hook: str) -> Hook:
    return store.hooks.get(tenant_id, hook)


def update(
    store: Store,
    tenant_id: str,
    hook: str,
    changes: Mapping[str, object],
    *,
    if_version: frozenset[int] | None = None,
) -> Hook:
    check_fields(changes, FIELDS)

    def change(current: HookSpec) -> HookSpec:
        return patched(HookSpec, current.model_dump(mode="json"), changes)

    return store.hooks.edit(tenant_id, hook, change, if_version=if_version)


def rotate(store: Store, tenant_id: str, hook: str, secret: str | None) -> CreatedHook:
    return store.hooks.rotate(tenant_id, hook, secret)


def delete(store: Store, tenant_id: str, hook: str) -> None:
    store.hooks.delete(tenant_id, hook)


def deliveries(store: Store, tenant_id: str, hook: str, *, page: PageRequest) -> Page[Delivery]:
    return store.hooks.deliveries(tenant_id, hook, page=page)


class HookRates:
    """Each hook's rates in this process (``TokenBucket``): its own for signed deliveries,
    and a fixed one for those it refuses unverified, so that garbage neither crowds out the
    sender nor fills the record. N API processes admit up to N times each; the tenant's own
    submission rate, shared by all, bounds the signed ones."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._buckets: dict[tuple[str, bool], TokenBucket] = {}
        self._lock = threading.Lock()

    def take(self, hook: Hook) -> None:
        """A signed delivery's token (else 429)."""
        self._take(hook, signed=True, rate=hook.rate_per_second, burst=hook.burst)

    def take_unverified(self, hook: Hook) -> None:
        """An unverified or replayed delivery's token (else 429): it is answered and recorded
        within ``UNVERIFIED_PER_SECOND``, bursts of ``UNVERIFIED_BURST``."""
        self._take(hook, signed=False, rate=UNVERIFIED_PER_SECOND, burst=UNVERIFIED_BURST)

    def _take(self, hook: Hook, *, signed: bool, rate: float, burst: int) -> None:
        now = self._clock.now()
        with self._lock:
            bucket = self._buckets.get((hook.id, signed))
            if bucket is None or (bucket.rate, bucket.capacity) != (rate, burst):
                bucket = TokenBucket(rate, burst, burst, now)
                self._buckets[hook.id, signed] = bucket
            wait = bucket.take(now)
        if wait > 0:
            metrics.hook_refused(429)
            what = "deliveries" if signed else "unverified deliveries"
            raise RateLimited(
                f"hook {hook.name} takes {rate:g} {what} per second (bursts of {burst}); "
                f"retry in {wait:.2f} s",
                retry_after_seconds=wait, rate=rate, burst=burst,
            )  # fmt: skip


def receiver(store: Store, hook_id: str) -> Receiver:
    return store.hooks.receiver(hook_id)


def verified_delivery(
    store: Store,
    receiver: Receiver,
    rates: HookRates,
    raw_headers: Iterable[tuple[str, str]],
    body: bytes,
) -> Verified:
    """The delivery, signed by the hook's sender and not seen before — charged to nothing
    yet; else why not, recorded without the body: 401 for a hook disabled, a signature that
    does not verify or a replay (429 past the hook's bound of those), 422 for a signed body
    that is no event (429 past the hook's rate)."""
    hook = receiver.hook
    headers: Mapping[str, str] = {}
    try:
        headers = single_headers(raw_headers)
        if not hook.enabled:
            raise Unverified("the hook is disabled")
        found = verify(hook.scheme, receiver.secret, headers, body, store.clock.now())
    except Unverified as error:
        rates.take_unverified(hook)
        refusal = Unauthorized(f"signature refused: {error}")
        claimed = claimed_delivery(hook.scheme, headers)
        raise _refused(store, receiver, claimed, refusal, 401) from None
    except Malformed as error:
        rates.take(hook)
        invalid = Invalid(str(error), field=error.field)
        claimed = claimed_delivery(hook.scheme, headers)
        raise _refused(store, receiver, claimed, invalid, 422) from None
    if store.hooks.seen(hook.id, found.signed_digest):
        rates.take_unverified(hook)
        raise _refused(store, receiver, found.delivery_id, Replayed(), 401)
    return found


def _refused(
    store: Store, receiver: Receiver, delivery_id: str | None, error: Exception, status: int
) -> Exception:
    """The refusal, recorded (with the delivery id claimed, to match the sender's log)."""
    record = DeliveryRecord(
        receiver.hook.id, receiver.tenant_id, delivery_id, None, DeliveryStatus.REJECTED,
        status, reason=str(error),
    )  # fmt: skip
    store.hooks.record(record)
    metrics.hook_refused(status)
    return error


def deliver(
    store: Store,
    receiver: Receiver,
    verified: Verified,
    charge: Callable[[int], None] | None = None,
) -> ReceivedEvent:
    """The verified delivery (charged to its hook and tenant) as an event; 200 with the first
    event for a delivery id accepted before and signed anew, 401 for a replay — one that
    raced its first past ``verified_delivery``'s look included. ``charge`` takes what its
    triggers' filters cost past the one submission it was admitted with, as an event's."""
    hook = receiver.hook
    record = DeliveryRecord(
        hook.id, receiver.tenant_id, verified.delivery_id, verified.signed_at,
        DeliveryStatus.ACCEPTED, 201, signed_digest=verified.signed_digest,
    )  # fmt: skip
    try:
        received, status = store.events.receive(
            receiver.tenant_id, event_name(hook.event, verified.kind), verified.payload,
            source=f"hook:{hook.id}", sender_id=verified.delivery_id,
            sender_key=f"hook:{hook.id}:{verified.delivery_id}", delivery=record,
            charge=charge,
        )  # fmt: skip
    except Replayed as error:
        raise _refused(store, receiver, verified.delivery_id, error, 401) from None
    if status is DeliveryStatus.REJECTED:
        metrics.hook_refused(401)
        raise Unauthorized(
            f"delivery {verified.delivery_id} was accepted before (as {received.event.id}): "
            "a replay starts nothing"
        )
    return received
