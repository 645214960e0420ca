"""Inbound webhooks (docs/events.md): a delivery's way in, from its hook to the runs its event
starts — signature and replay (a refusal answered within the hook's bound of refusals, so an
anonymous sender costs its tenant nothing), then the hook's rate and the tenant's, then an
event like any other (``app.events``) — and a hook's fields changed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping

from herder.app.events import Arrival, receive_event
from herder.clock import Clock
from herder.domain import moves
from herder.domain.errors import Invalid, RateLimited, Unauthorized
from herder.domain.events import ReceivedEvent
from herder.domain.hooks import (
    UNVERIFIED_BURST,
    UNVERIFIED_PER_SECOND,
    DeliveryStatus,
    Hook,
    HookSpec,
    Malformed,
    Replayed,
    TokenBucket,
    Unverified,
    claimed_delivery,
    event_name,
    single_headers,
    verify,
)
from herder.domain.patches import check_fields, patched
from herder.store.hooks import DeliveryRecord, Receiver
from herder.store.moves.guard import acting
from herder.store.store import Store
from herder.telemetry import metrics

FIELDS = frozenset(HookSpec.model_fields)  # what a PATCH may change (not the name)

AdmitTenant = Callable[[str, int], None]  # takes submissions from a tenant's rate, or 429


def receive_delivery(
    store: Store,
    rates: HookRates,
    hook_id: str,
    raw_headers: Iterable[tuple[str, str]],
    read_body: Callable[[], bytes],
    admit: AdmitTenant,
) -> ReceivedEvent:
    """A delivery to ``/v1/hooks/{hook_id}`` as an event, or why not — each refusal recorded
    without the body: 404 for no such hook; 401 for a hook disabled, a signature that does
    not verify or a replay (429 past the hook's bound of those); 422 for a signed body that
    is no event; 429 past the hook's rate or the tenant's. A delivery id accepted before
    and signed anew answers with the first event (``duplicate``), starting nothing."""
    # the hook, whoever's it is (the signature decides), its secret opened; only then is
    # the body read
    receiver = store.hooks.receiver(hook_id)
    moving = store.moves.status(receiver.tenant_id)
    if refused := moves.refusal(moving.tenant_id, moving.state, moving.cell, "POST", ""):
        raise refused  # its tenant is moving between cells: the sender tries again
    with acting(receiver.tenant_id, "POST", ""):  # and if it froze since: moves/guard.py
        return _verified(store, rates, receiver, raw_headers, read_body, admit)


def _verified(
    store: Store,
    rates: HookRates,
    receiver: Receiver,
    raw_headers: Iterable[tuple[str, str]],
    read_body: Callable[[], bytes],
    admit: AdmitTenant,
) -> ReceivedEvent:
    """The delivery read, verified, charged and made an event (``receive_delivery``)."""
    hook = receiver.hook
    body = read_body()
    # verified: signed by the hook's sender (charged to nothing yet)
    headers: Mapping[str, str] = {}
    try:
        headers = single_headers(raw_headers)
        if not hook.enabled:
            raise Unverified("the hook is disabled")
        verified = verify(hook.scheme, receiver.secret, headers, body, store.clock.now())
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
    # not a replay: what it signed was not accepted before (the unique key on the signed
    # digest, written with the event, refuses one that races its first past this look)
    if store.hooks.seen(hook.id, verified.signed_digest):
        rates.take_unverified(hook)
        raise _refused(store, receiver, verified.delivery_id, Replayed(), 401)
    # charged: the hook's rate, then one submission of the tenant's
    rates.take(hook)
    try:
        admit(receiver.tenant_id, 1)
    except RateLimited:
        metrics.hook_refused(429)
        raise
    # the event, its runs and the delivery's record in one unit of work (``app.events``);
    # what its triggers' filters cost past the one submission is charged as an event's
    arrival = Arrival(
        receiver.tenant_id, event_name(hook.event, verified.kind), verified.payload,
        f"hook:{hook.id}", verified.delivery_id, f"hook:{hook.id}:{verified.delivery_id}",
        DeliveryRecord(
            hook.id, receiver.tenant_id, verified.delivery_id, verified.signed_at,
            DeliveryStatus.ACCEPTED, 201, signed_digest=verified.signed_digest,
        ),
    )  # fmt: skip
    try:
        received, status = receive_event(
            store, arrival, lambda more: admit(receiver.tenant_id, more)
        )
    except Replayed as error:
        raise _refused(store, receiver, verified.delivery_id, error, 401) from None
    if status is DeliveryStatus.REJECTED:  # its delivery id was accepted, signed earlier
        metrics.hook_refused(401)
        raise Unauthorized(
            f"delivery {verified.delivery_id} was accepted before (as {received.event.id}): "
            "a replay starts nothing"
        )
    return received


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


def update_hook(
    store: Store,
    tenant_id: str,
    hook: str,
    changes: Mapping[str, object],
    *,
    if_version: frozenset[int] | None = None,
) -> Hook:
    """Some of the hook's fields changed, the rest kept, in one transaction."""
    check_fields(changes, FIELDS)

    def change(current: HookSpec) -> HookSpec:
        return patched(HookSpec, current.model_dump(mode="json"), changes)

    return store.hooks.edit(tenant_id, hook, change, if_version=if_version)
