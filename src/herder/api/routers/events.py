"""/v1/events: events a tenant sends, and the work their triggers started (docs/events.md)."""

from __future__ import annotations

from typing import Annotated

import anyio.from_thread
from fastapi import APIRouter, Query, Request, Response, status

from herder.api.auth import Caller, StoreDep
from herder.api.openapi import problems
from herder.api.queries import Paging
from herder.api.ratelimit import Submitter, admit
from herder.app import events
from herder.domain.events import Event as EventRecord
from herder.domain.events import EventName, EventRequest, EventSummary, ReceivedEvent
from herder.domain.models import Page

router = APIRouter(prefix="/v1/events", tags=["events"])


@router.post("", status_code=status.HTTP_201_CREATED, responses=problems(409, 413, 429))
def send_event(
    body: EventRequest, caller: Submitter, store: StoreDep, request: Request, response: Response
) -> ReceivedEvent:
    """Record the event and start what its triggers say, in one transaction; each matching
    trigger's outcome (the run it started, or why not) is in ``event.outcomes``. Counted
    against the tenant's submission rate (429): one submission, and one more per 10,000
    steps its filters took (docs/events.md#what-an-event-may-cost). An ``id`` sent before
    answers 200 with the first event (``duplicate``), starting nothing."""

    def admit_more(submissions: int) -> None:  # on this worker thread; the limiter is the loop's
        anyio.from_thread.run(admit, caller, request, submissions)

    received = events.send_event(store, caller, body, admit_more)
    if received.duplicate:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/v1/events/{received.event.id}"
    return received


@router.get("")
def list_events(
    caller: Caller,
    store: StoreDep,
    page: Paging,
    name: Annotated[EventName | None, Query(description="only events of this name")] = None,
) -> Page[EventSummary]:
    """Newest first, without payloads; kept 30 days."""
    return store.events.list(caller.tenant_id, name=name, page=page)


@router.get("/{event_id}")
def get_event(event_id: str, caller: Caller, store: StoreDep) -> EventRecord:
    return store.events.get(caller.tenant_id, event_id)
