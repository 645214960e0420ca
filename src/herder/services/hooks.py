"""Inbound webhooks (docs/events.md): a developer's hooks, and a delivery's way in —
rate, signature, replay, then an event like any other."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from herder.clock import Clock
from herder.domain.errors import Invalid, RateLimited, Unauthorized
from herder.domain.events import ReceivedEvent
from herder.domain.hooks import (
    CreatedHook,
    Delivery,
    DeliveryStatus,
    Hook,
    HookRequest,
    HookSpec,
    Malformed,
    TokenBucket,
    Unverified,
    claimed_delivery,
    event_name,
    verify,
)
from herder.domain.models import Page
from herder.services.patches import check_fields, patched
from herder.store.hooks import DeliveryRecord, Receiver
from herder.store.store import Store
from herder.telemetry import metrics

FIELDS = frozenset(HookSpec.model_fields)


def create(store: Store, tenant_id: str, request: HookRequest) -> CreatedHook:
    return store.hooks.create(tenant_id, request)


def list_hooks(
    store: Store, tenant_id: str, *, limit: int, cursor: str | None, id_prefix: str | None
) -> Page[Hook]:
    return store.hooks.list(tenant_id, limit=limit, cursor=cursor, id_prefix=id_prefix)


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


def deliveries(
    store: Store, tenant_id: str, hook: str, *, limit: int, cursor: str | None
) -> Page[Delivery]:
    return store.hooks.deliveries(tenant_id, hook, limit=limit, cursor=cursor)


class HookRates:
    """Each hook's rate in this process (``TokenBucket``): N API processes admit up to N
    times a hook's rate; the tenant's own submission rate, shared by all, bounds the rest."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()

    def take(self, hook: Hook) -> None:
        now = self._clock.now()
        with self._lock:
            bucket = self._buckets.get(hook.id)
            if bucket is None or (bucket.rate, bucket.capacity) != (
                hook.rate_per_second,
                hook.burst,
            ):
                bucket = TokenBucket(hook.rate_per_second, hook.burst, hook.burst, now)
                self._buckets[hook.id] = bucket
            wait = bucket.take(now)
        if wait > 0:
            metrics.hook_refused(429)
            raise RateLimited(
                f"hook {hook.name} takes {hook.rate_per_second:g} deliveries per second "
                f"(bursts of {hook.burst}); retry in {wait:.2f} s",
                retry_after_seconds=wait, rate=hook.rate_per_second, burst=hook.burst,
            )  # fmt: skip


def receiver(store: Store, hook_id: str) -> Receiver:
    return store.hooks.receiver(hook_id)


def deliver(
    store: Store, receiver: Receiver, headers: Mapping[str, str], body: bytes
) -> ReceivedEvent:
    """The delivery as an event, or why not: 401 for a signature that does not verify or a
    replay or a disabled hook, 422 for a signed body that is no event — each recorded
    (without the body)."""
    hook = receiver.hook

    def refuse(error: Exception, status: int) -> Exception:
        record = DeliveryRecord(
            hook.id, receiver.tenant_id, claimed_delivery(hook.scheme, headers), None,
            DeliveryStatus.REJECTED, status, reason=str(error),
        )  # fmt: skip
        store.hooks.record(record)
        metrics.hook_refused(status)
        return error

    if not hook.enabled:
        raise refuse(Unauthorized("this hook is disabled"), 401)
    try:
        verified = verify(hook.scheme, receiver.secret, headers, body, store.clock.now())
    except Unverified as error:
        raise refuse(Unauthorized(f"signature refused: {error}"), 401) from None
    except Malformed as error:
        raise refuse(Invalid(str(error), field=error.field), 422) from None
    record = DeliveryRecord(
        hook.id, receiver.tenant_id, verified.delivery_id, verified.signed_at,
        DeliveryStatus.ACCEPTED, 201,
    )  # fmt: skip
    received, status = store.events.receive(
        receiver.tenant_id, event_name(hook.event, verified.kind), verified.payload,
        source=f"hook:{hook.id}", sender_id=verified.delivery_id,
        sender_key=f"hook:{hook.id}:{verified.delivery_id}", delivery=record,
    )  # fmt: skip
    if status is DeliveryStatus.REJECTED:
        metrics.hook_refused(401)
        raise Unauthorized(
            f"delivery {verified.delivery_id} was accepted before (as {received.event.id}): "
            "a replay starts nothing"
        )
    return received
