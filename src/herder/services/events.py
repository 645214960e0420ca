"""Events a tenant sends (docs/events.md): recorded, de-duplicated by the sender's id, and
started on by their triggers."""

from __future__ import annotations

import json

from herder.domain.errors import TooLarge
from herder.domain.events import MAX_PAYLOAD_BYTES, Event, EventRequest, EventSummary, ReceivedEvent
from herder.domain.models import Page, Principal
from herder.store.store import Store


def send(store: Store, caller: Principal, request: EventRequest) -> ReceivedEvent:
    size = len(json.dumps(request.payload, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_PAYLOAD_BYTES:
        raise TooLarge(f"the payload is {size} bytes as JSON; the limit is {MAX_PAYLOAD_BYTES}")
    received, _ = store.events.receive(
        caller.tenant_id, request.name, request.payload, source=f"api:{caller.key_id}",
        sender_id=request.id, sender_key=None if request.id is None else f"api:{request.id}",
    )  # fmt: skip
    return received


def list_events(
    store: Store,
    tenant_id: str,
    *,
    name: str | None,
    limit: int,
    cursor: str | None,
    id_prefix: str | None,
) -> Page[EventSummary]:
    return store.events.list(tenant_id, name=name, limit=limit, cursor=cursor, id_prefix=id_prefix)


def read(store: Store, tenant_id: str, event_id: str) -> Event:
    return store.events.get(tenant_id, event_id)
