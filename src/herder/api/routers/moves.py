"""A cell's part in moving a tenant to another cell (docs/cells.md, "Moving a tenant"), for
the system tenant's admins; the edge calls these in turn (``edge/moves.py``).

    source   PUT  /v1/tenants/{id}/move {"state": "frozen", "cell", "pools"}  frozen
             GET  /v1/tenants/{id}/export                                     its definitions
             GET  /v1/tenants/{id}/export/artifacts/{sha256}                  a program's bytes
             PUT  /v1/tenants/{id}/move {"state": "moved" | null, "cell"}     moved, or unfrozen
    target   PUT  /v1/tenants/{id}/import/artifacts/{sha256}                  a program's bytes
             POST /v1/tenants/import                                 arriving (or returning)
             PUT  /v1/tenants/{id}/move {"state": null}                       at home
             DELETE /v1/tenants/{id}/import                                   taken back
"""

from __future__ import annotations

import tempfile

from fastapi import APIRouter, Request, status
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from herder.api.audit import acted_on
from herder.api.auth import StoreDep, SystemAdmin
from herder.api.openapi import problems
from herder.app import moves
from herder.domain.artifacts import is_sha256
from herder.domain.errors import NotFound, TooLarge
from herder.domain.jobs import MAX_ARTIFACT_BYTES
from herder.domain.moves import MoveShift, TenantExport, TenantMoveStatus, is_tenant_id

router = APIRouter(tags=["administration"])
SPOOLED_BYTES = 1024 * 1024  # a program received is kept in memory up to this, then on disk


@router.put("/v1/tenants/{tenant_id}/move", responses=problems(409))
def shift_tenant(
    tenant_id: str, body: MoveShift, _admin: SystemAdmin, store: StoreDep
) -> TenantMoveStatus:
    """The tenant's state in its move: ``frozen`` towards ``cell`` (409 naming the pools it
    uses that ``pools``, the target's, lacks: nothing changes), ``moved`` to ``cell``, or
    ``null`` (unfrozen, or an arriving tenant taken in). 409 for any other shift."""
    shifted = moves.shift(store, tenant_id, body.state, body.cell, body.pools)
    return TenantMoveStatus(tenant_id=shifted.tenant_id, state=shifted.state, cell=shifted.cell)


@router.get("/v1/tenants/{tenant_id}/export", responses=problems(409))
def export_tenant(tenant_id: str, _admin: SystemAdmin, store: StoreDep) -> TenantExport:
    """A frozen tenant's definitions, read once (409 unless frozen). Its secrets travel
    opened, to be sealed by the target cell's key: this answer is kept nowhere."""
    return store.moves.export(tenant_id)


@router.get(
    "/v1/tenants/{tenant_id}/export/artifacts/{artifact_id}",
    response_class=StreamingResponse,
    responses=problems(409),
)
def export_artifact(
    tenant_id: str, artifact_id: str, _admin: SystemAdmin, store: StoreDep
) -> StreamingResponse:
    """A frozen tenant's program, its bytes as uploaded."""
    content = store.moves.artifact_content(tenant_id, artifact_id)
    return StreamingResponse(content, media_type="application/octet-stream")


@router.put(
    "/v1/tenants/{tenant_id}/import/artifacts/{artifact_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problems(409),
)
async def import_artifact(
    tenant_id: str, artifact_id: str, _admin: SystemAdmin, store: StoreDep, request: Request
) -> Response:
    """A moving tenant's program (raw bytes, ``application/octet-stream``, their sha256 the
    path's), kept before the import names it; 409 for a tenant that lives here."""
    if not is_tenant_id(tenant_id):  # as no import could name it, nor a blob's key hold it
        raise NotFound(f"tenant {tenant_id[:64]} can arrive in no cell: it is no tenant id")
    if not is_sha256(artifact_id):
        raise NotFound(f"artifact {artifact_id[:64]} is no sha256")
    with tempfile.SpooledTemporaryFile(max_size=SPOOLED_BYTES) as content:
        size = 0
        async for piece in request.stream():
            size += len(piece)
            if size > MAX_ARTIFACT_BYTES:
                raise TooLarge(f"a program is at most {MAX_ARTIFACT_BYTES} bytes")
            content.write(piece)
        content.seek(0)
        await run_in_threadpool(store.moves.receive_artifact, tenant_id, artifact_id, content)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/v1/tenants/import", status_code=status.HTTP_201_CREATED, responses=problems(409))
def import_tenant(
    body: TenantExport, _admin: SystemAdmin, store: StoreDep, request: Request
) -> TenantMoveStatus:
    """A tenant exported by another cell, arriving here (its writes refused, its schedules
    not firing until it is taken in), in one transaction — or returning, to a cell it left:
    its definitions replaced under the same ids, its history here kept. The same document
    twice makes one tenant; 409 for a tenant that lives here, an id or name another tenant
    holds, a pool this cell lacks, a program whose bytes were not sent."""
    moving = moves.import_tenant(store, body)
    acted_on(request, moving.tenant_id)  # its log here begins with its arrival
    return TenantMoveStatus(tenant_id=moving.tenant_id, state=moving.state, cell=moving.cell)


@router.delete(
    "/v1/tenants/{tenant_id}/import",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problems(409),
)
def remove_import(tenant_id: str, _admin: SystemAdmin, store: StoreDep) -> Response:
    """An arriving tenant's import taken back (its move failed), a returning one moved
    again; 409 for one that lives here, nothing for one not here."""
    store.moves.remove_import(tenant_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
