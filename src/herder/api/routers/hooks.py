"""/v1/hooks: inbound webhooks (docs/events.md). A developer makes a hook and hands its URL
and secret to the sender; the sender POSTs to its URL, ``/v1/hooks/{tenant id}.{id}`` (the
tenant named for the edge's routing; ``/v1/hooks/{id}`` is taken too) with no API key — the
signature is the credential — and each verified delivery becomes an event."""

from __future__ import annotations

from typing import Annotated, Any

import anyio.from_thread
from fastapi import APIRouter, Body, Header, Request, Response, status
from starlette.concurrency import run_in_threadpool

from herder.api.auth import Caller, StoreDep, Writer
from herder.api.etags import tagged, versions
from herder.api.openapi import ETAG_HEADER, patch_body, problems
from herder.api.queries import CursorPaging, Paging
from herder.api.ratelimit import admit_tenant
from herder.app import hooks
from herder.domain.events import ReceivedEvent
from herder.domain.hooks import CreatedHook, Delivery, Hook, HookRequest, HookSpec, SecretChange
from herder.domain.models import Page

router = APIRouter(prefix="/v1/hooks", tags=["events"])

IF_MATCH = "the ETag of the hook as last read: change it only if it is still that version"


@router.post(
    "", status_code=status.HTTP_201_CREATED, responses={201: ETAG_HEADER, **problems(409, 503)}
)
def create_hook(
    body: HookRequest, caller: Writer, store: StoreDep, response: Response
) -> CreatedHook:
    """The hook and its URL; its signing secret (the one given — Stripe's ``whsec_…`` — or
    a new one) is in this answer only."""
    hook = store.hooks.create(caller.tenant_id, body)
    response.headers["Location"] = f"/v1/hooks/{hook.id}"
    return tagged(hook, response)


@router.get("")
def list_hooks(
    caller: Caller,
    store: StoreDep,
    page: Paging,
) -> Page[Hook]:
    return store.hooks.list(caller.tenant_id, page=page)


@router.get("/{hook_id}", responses={200: ETAG_HEADER})
def get_hook(hook_id: str, caller: Caller, store: StoreDep, response: Response) -> Hook:
    """By id or name; never its secret."""
    return tagged(store.hooks.get(caller.tenant_id, hook_id), response)


@router.patch(
    "/{hook_id}", responses={200: ETAG_HEADER, **problems(412)}, openapi_extra=patch_body(HookSpec)
)
def update_hook(
    hook_id: str,
    caller: Writer,
    store: StoreDep,
    response: Response,
    changes: Annotated[dict[str, Any], Body(examples=[{"enabled": False}])],
    if_match: Annotated[str | None, Header(max_length=1024, description=IF_MATCH)] = None,
) -> Hook:
    hook = hooks.update_hook(
        store, caller.tenant_id, hook_id, changes, if_version=versions(if_match)
    )
    return tagged(hook, response)


@router.delete("/{hook_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_hook(hook_id: str, caller: Writer, store: StoreDep) -> Response:
    """Its URL answers 404 from then on."""
    store.hooks.delete(caller.tenant_id, hook_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{hook_id}/secret", responses=problems(503))
def rotate_secret(
    hook_id: str,
    caller: Writer,
    store: StoreDep,
    body: Annotated[SecretChange | None, Body()] = None,
) -> CreatedHook:
    """A new signing secret (the sender's, given; else a new one) in this answer only; the
    URL stays. Deliveries signed with the old secret are refused from now on: give the
    sender the new one first where it can hold two (GitHub cannot; Stripe can roll)."""
    return store.hooks.rotate(caller.tenant_id, hook_id, body.secret if body else None)


@router.get("/{hook_id}/deliveries")
def list_deliveries(
    hook_id: str,
    caller: Caller,
    store: StoreDep,
    page: CursorPaging,
) -> Page[Delivery]:
    """Every request that got past the hook's rate, newest first, without bodies: accepted,
    a duplicate, or rejected and why."""
    return store.hooks.deliveries(caller.tenant_id, hook_id, page=page)


@router.post(
    "/{hook_id}",
    status_code=status.HTTP_201_CREATED,
    responses=problems(401, 413, 422, 429),
    openapi_extra={
        "security": [],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
    },
)
async def deliver(
    hook_id: str, request: Request, store: StoreDep, response: Response
) -> ReceivedEvent:
    """An inbound delivery (no API key: signed as the hook's scheme says). 201 with the
    event; 200 for a delivery id accepted before and signed anew (the sender retrying),
    starting nothing; 401 for a bad, missing or replayed signature or a header that signs or
    selects a delivery given twice; 429 past the hook's bound of those, or past the hook's
    or the tenant's rate. Only a verified delivery is charged to the tenant."""

    def read_body() -> bytes:  # on the worker thread, once the hook is known
        return anyio.from_thread.run(request.body)

    def admit(tenant_id: str, submissions: int) -> None:  # the limiter is the loop's
        anyio.from_thread.run(admit_tenant, tenant_id, request, submissions)

    received = await run_in_threadpool(
        hooks.receive_delivery, store, request.app.state.hook_rates, hook_id,
        request.headers.items(), read_body, admit,
    )  # fmt: skip
    if received.duplicate:
        response.status_code = status.HTTP_200_OK
    return received
