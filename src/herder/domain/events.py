"""Events: named JSON facts a tenant sends (``POST /v1/events``) or an inbound webhook
delivers (``domain.hooks``), each recorded with the work its triggers started
(docs/events.md).

An event's ``id`` (optional, the sender's) de-duplicates: a second event under the same id
within the retention starts nothing and answers with the first. Events are kept
``EVENT_RETENTION_DAYS``; the runs they started are kept as any run is.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, field_validator

from herder.domain.models import _Record

MAX_PAYLOAD_BYTES = 256 * 1024  # an event's JSON payload, as sent
MAX_PAYLOAD_DEPTH = 64  # arrays and objects within each other
MAX_EVENT_ID_CHARS = 128
EVENT_RETENTION_DAYS = 30
EVENT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$"
_EVENT_NAME = re.compile(EVENT_NAME_PATTERN)

EventName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        pattern=EVENT_NAME_PATTERN,
        description="letters, digits and _ . : - (e.g. github.push, order.paid)",
    ),
]
EventId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_EVENT_ID_CHARS,
        pattern=r"^[\x21-\x7e]+$",
        description="the sender's id of this event: a repeat within the retention starts "
        "nothing and answers with the first event",
    ),
]


def is_event_name(name: str) -> bool:
    return bool(_EVENT_NAME.match(name))


class EventRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: EventName
    payload: JsonValue = Field(
        default_factory=dict, description=f"any JSON, at most {MAX_PAYLOAD_BYTES} bytes"
    )
    id: EventId | None = None

    @field_validator("payload")
    @classmethod
    def _shallow_enough(cls, payload: JsonValue) -> JsonValue:
        check_depth(payload)
        return payload


class TriggerOutcome(_Record):
    """What one matching trigger did with the event: started a run or a workflow run, or
    why it could not."""

    trigger_id: str
    trigger_name: str
    run_id: str | None = None
    workflow_run_id: str | None = None
    error: str | None = None


class EventSummary(_Record):
    id: str
    name: str
    source: str = Field(description="api (key id) or hook (its id)")
    sender_id: str | None = Field(description="the sender's id of the event, if it gave one")
    received_at: datetime
    outcomes: list[TriggerOutcome]
    resumed: Annotated[list[str], BeforeValidator(lambda value: value or [])] = Field(
        default_factory=list, description="the runs of waiting workflow tasks it ended"
    )


class Event(EventSummary):
    payload: Any


class ReceivedEvent(_Record):
    """The answer to a sent event: the event, and whether it is the first under its id."""

    event: Event
    duplicate: bool


def check_depth(payload: Any) -> None:
    """``ValueError`` for a payload nested deeper than ``MAX_PAYLOAD_DEPTH``: a filter
    compares values recursively, and no event needs more."""
    level: list[Any] = [payload]
    for _ in range(MAX_PAYLOAD_DEPTH + 1):
        level = [
            child
            for item in level
            if isinstance(item, list | dict)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return
    raise ValueError(f"the payload is nested deeper than {MAX_PAYLOAD_DEPTH} levels")


def document(name: str, source: str, payload: Any) -> dict[str, Any]:
    """What a trigger's filter and parameters read: the event's name, source and payload."""
    return {"name": name, "source": source, "payload": payload}
