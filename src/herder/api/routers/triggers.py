"""/v1/triggers: which events start which jobs and workflows (docs/events.md). A trigger is
named in the path by its id or its name; PATCH takes ``If-Match`` as a limit's."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Response, status

from herder.api.auth import Caller, StoreDep, Writer
from herder.api.etags import tagged, versions
from herder.api.openapi import ETAG_HEADER, patch_body, problems
from herder.api.queries import Paging
from herder.app import triggers
from herder.domain.models import Page
from herder.domain.triggers import Trigger, TriggerRequest, TriggerSpec

router = APIRouter(prefix="/v1/triggers", tags=["events"])

IF_MATCH = "the ETag of the trigger as last read: change it only if it is still that version"


@router.post("", status_code=status.HTTP_201_CREATED, responses={201: ETAG_HEADER, **problems(409)})
def create_trigger(
    body: TriggerRequest, caller: Writer, store: StoreDep, response: Response
) -> Trigger:
    """An event name, an optional filter (422 saying where it is wrong), and one job or
    workflow of the tenant (by name) with parameters read from the event."""
    spec = TriggerSpec.model_validate(body.model_dump(exclude={"name"}))
    trigger = store.triggers.create(caller.tenant_id, body.name, spec)
    response.headers["Location"] = f"/v1/triggers/{trigger.id}"
    return tagged(trigger, response)


@router.get("")
def list_triggers(
    caller: Caller,
    store: StoreDep,
    page: Paging,
) -> Page[Trigger]:
    return store.triggers.list(caller.tenant_id, page=page)


@router.get("/{trigger_id}", responses={200: ETAG_HEADER})
def get_trigger(trigger_id: str, caller: Caller, store: StoreDep, response: Response) -> Trigger:
    """By id or name."""
    return tagged(store.triggers.get(caller.tenant_id, trigger_id), response)


@router.patch(
    "/{trigger_id}",
    responses={200: ETAG_HEADER, **problems(412)},
    openapi_extra=patch_body(TriggerSpec),
)
def update_trigger(
    trigger_id: str,
    caller: Writer,
    store: StoreDep,
    response: Response,
    changes: Annotated[dict[str, Any], Body(examples=[{"enabled": False}])],
    if_match: Annotated[str | None, Header(max_length=1024, description=IF_MATCH)] = None,
) -> Trigger:
    trigger = triggers.update_trigger(
        store, caller.tenant_id, trigger_id, changes, if_version=versions(if_match)
    )
    return tagged(trigger, response)


@router.delete("/{trigger_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_trigger(trigger_id: str, caller: Writer, store: StoreDep) -> Response:
    store.triggers.delete(caller.tenant_id, trigger_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
