"""/v1/limits: a tenant's named limits by key (docs/flow-control.md).

A limit is named in the path by its id or its name. Its ``ETag`` is its version in quotes, as
a job's; a PATCH with ``If-Match`` applies only if the limit is still at that version (412).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Response, status

from herder.api.auth import Caller, StoreDep, Writer
from herder.api.etags import tagged, versions
from herder.api.openapi import ETAG_HEADER, patch_body, problems
from herder.api.queries import Limit as PageSize
from herder.api.queries import Paging
from herder.api.schemas import LimitCreate
from herder.app import limits
from herder.domain.limits import Limit, LimitKeyUsage
from herder.domain.models import Page

router = APIRouter(prefix="/v1/limits", tags=["limits"])

IF_MATCH = (
    'the ETag of the limit as last read, e.g. "3": change it only if it is still that '
    "version (else 412)"
)


@router.post("", status_code=status.HTTP_201_CREATED, responses={201: ETAG_HEADER, **problems(409)})
def create_limit(body: LimitCreate, caller: Writer, store: StoreDep, response: Response) -> Limit:
    """A limit bounds something: ``max_running`` per key, ``rate`` or ``debounce`` (422
    otherwise). A name the tenant already uses is 409."""
    limit = store.limits.create(caller.tenant_id, body.name, body.spec())
    response.headers["Location"] = f"/v1/limits/{limit.id}"
    return tagged(limit, response)


@router.get("")
def list_limits(
    caller: Caller,
    store: StoreDep,
    page: Paging,
) -> Page[Limit]:
    """Newest first."""
    return store.limits.list(caller.tenant_id, page=page)


@router.get("/{limit_id}", responses={200: ETAG_HEADER})
def get_limit(limit_id: str, caller: Caller, store: StoreDep, response: Response) -> Limit:
    """By id or name."""
    return tagged(store.limits.get(caller.tenant_id, limit_id), response)


@router.patch(
    "/{limit_id}",
    responses={200: ETAG_HEADER, **problems(412)},
    openapi_extra=patch_body(LimitCreate),
)
def update_limit(
    limit_id: str,
    caller: Writer,
    store: StoreDep,
    response: Response,
    changes: Annotated[dict[str, Any], Body(examples=[{"max_running": 2}])],
    if_match: Annotated[str | None, Header(max_length=1024, description=IF_MATCH)] = None,
) -> Limit:
    """Change some fields; the rest keep their values. Runs already counted keep their keys;
    the dispatcher's next pass uses the change."""
    limit = limits.update(store, caller.tenant_id, limit_id, changes, if_version=versions(if_match))
    return tagged(limit, response)


@router.delete("/{limit_id}", status_code=status.HTTP_204_NO_CONTENT, responses=problems(409))
def delete_limit(limit_id: str, caller: Writer, store: StoreDep) -> Response:
    """Refused (409, naming them) while jobs, schedules or workflows name the limit."""
    store.limits.delete(caller.tenant_id, limit_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{limit_id}/keys")
def list_keys(
    limit_id: str, caller: Caller, store: StoreDep, limit: PageSize = 100
) -> list[LimitKeyUsage]:
    """The limit's keys with active runs (running, queued, scheduled), busiest first, at
    most ``limit``."""
    return store.limits.keys(caller.tenant_id, limit_id, count=limit)
