"""Events a tenant sends (docs/events.md): recorded, de-duplicated by the sender's id, and
started on by their triggers."""

from __future__ import annotations

import json
from collections.abc import Callable

from herder.domain.errors import TooLarge
from herder.domain.event_evaluation import charged
from herder.domain.events import MAX_PAYLOAD_BYTES, Event, EventRequest, EventSummary, ReceivedEvent
from herder.domain.listings import PageRequest
from herder.domain.models import Page, Principal
from herder.domain.submit_rate import bucket_shape
from herder.store.store import Store


def send(
    store: Store,
    caller: Principal,
    request: EventRequest,
    charge: Callable[[int], None] | None = None,
) -> ReceivedEvent:
    """``charge`` takes what the event costs in submissions past the one it was admitted
    with (``domain.event_evaluation``), before anything is written: it may refuse it (429)."""
    size = len(json.dumps(request.payload, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_PAYLOAD_BYTES:
        raise TooLarge(f"the payload is {size} bytes as JSON; the limit is {MAX_PAYLOAD_BYTES}")
    received, _ = store.events.receive(
        caller.tenant_id, request.name, request.payload, source=f"api:{caller.key_id}",
        sender_id=request.id, sender_key=None if request.id is None else f"api:{request.id}",
        charge=charge,
    )  # fmt: skip
    return received


def more_submissions(store: Store, tenant_id: str, submissions: int) -> int:
    """What an event that cost ``submissions`` takes past the one it was admitted with,
    within the tenant's burst (``domain.event_evaluation.charged``)."""
    shape = bucket_shape(store.access.tenant_quotas(tenant_id))
    return charged(submissions, None if shape is None else shape.capacity)


def list_events(
    store: Store,
    tenant_id: str,
    *,
    name: str | None,
    page: PageRequest,
) -> Page[EventSummary]:
    return store.events.list(tenant_id, name=name, page=page)


def read(store: Store, tenant_id: str, event_id: str) -> Event:
    return store.events.get(tenant_id, event_id)
