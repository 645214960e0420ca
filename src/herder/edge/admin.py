"""The edge's own routes, for the system's admins: cells listed (each probed) and created,
tenants created in a cell and placed, a cell's tenants made before cells adopted.

Who is an admin is asked of a cell, never kept at the edge: the caller's key goes to the
default cell's ``GET /v1/keys/current`` (the whoami), and only a system tenant's admin key
there may list or create cells. A tenant is created by the cell it will live in, with the
caller's key: that cell's own check says whether it is one of its system admins. So the edge
holds no credential, a key revoked in a cell stops working here within that cell's 5 s, and a
cell's admin can place tenants only in their own cell. (The app sends a key only to the cell
its tenant lives in: ``Edge.check_key_for``.) Creating is in that order — the
cell makes the tenant, then the directory places it — so no directory entry ever names a
tenant that does not exist; a tenant made whose placing failed is placed by adopting.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from herder.api.errors import herder_problem, problem
from herder.directory.repository import Directory
from herder.domain.cells import Cell, CellCreate, CellListing, CellStatus
from herder.domain.errors import Forbidden, Invalid, TooLarge, Unavailable
from herder.edge.forwarding import cell_unavailable
from herder.edge.settings import PROBE_SECONDS
from herder.telemetry import tracing

MAX_ADMIN_BODY = 64 * 1024  # a cell's or a tenant's definition
ADOPT_PAGE = 1000


class Refused(Exception):
    """An answer to send instead of going on (a refusal, a cell down)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def authorization_of(request: Request) -> dict[str, str]:
    given = request.headers.get("authorization")
    return {"Authorization": given} if given else {}


async def ask(
    http: httpx.AsyncClient, cell: Cell, method: str, path: str, **options: Any
) -> httpx.Response:
    """A call to ``cell``'s API; its 503 or its silence is ``Refused`` naming it. While
    tracing is on, its span is a child of the edge's request's (a move: one trace)."""
    if trace_context := tracing.trace_context():
        traced = {name.decode(): value.decode("latin-1") for name, value in trace_context}
        options["headers"] = {**options.get("headers", {}), **traced}
    try:
        answer = await http.request(method, f"{cell.api_url}{path}", **options)
    except httpx.TimeoutException:
        raise Refused(cell_unavailable(cell, "it did not answer in time")) from None
    except httpx.TransportError as error:
        raise Refused(
            cell_unavailable(cell, f"it cannot be reached ({type(error).__name__})")
        ) from None
    if answer.status_code == 503:
        raise Refused(cell_unavailable(cell, _detail(answer) or "it answered 503"))
    return answer


def _detail(answer: httpx.Response) -> str | None:
    try:
        return str(answer.json()["detail"])
    except (ValueError, KeyError, TypeError):
        return None


def passed_on(answer: httpx.Response) -> Response:
    """A cell's refusal (401, 403, 404, 409, 422 …) as it gave it."""
    headers = {
        name: value
        for name, value in answer.headers.items()
        if name.lower() in ("www-authenticate", "retry-after")
    }
    return Response(
        answer.content,
        status_code=answer.status_code,
        media_type=answer.headers.get("content-type"),
        headers=headers,
    )


async def check_system_admin(http: httpx.AsyncClient, request: Request, cell: Cell) -> None:
    await check_system_admin_key(http, authorization_of(request), cell)


async def check_system_admin_key(
    http: httpx.AsyncClient, authorization: dict[str, str], cell: Cell
) -> None:
    """That the key in ``authorization`` is an admin's of ``cell``'s system tenant, as the
    cell says (its whoami)."""
    answer = await ask(http, cell, "GET", "/v1/keys/current", headers=authorization)
    if answer.status_code != 200:
        raise Refused(passed_on(answer))
    caller = answer.json()
    if not (caller.get("is_system") and caller.get("role") == "admin"):
        raise Refused(
            herder_problem(
                Forbidden(f"only an admin of cell {cell.name}'s system tenant may do this")
            )
        )


async def body_of(request: Request) -> bytes:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_ADMIN_BODY:
            raise Refused(
                herder_problem(TooLarge(f"the request body is over {MAX_ADMIN_BODY} bytes"))
            )
    return body


async def probe(http: httpx.AsyncClient, cell: Cell) -> bool:
    try:
        answer = await http.get(f"{cell.api_url}/readyz", timeout=PROBE_SECONDS)
    except httpx.HTTPError:
        return False
    return answer.status_code == 200


async def cell_statuses(http: httpx.AsyncClient, directory: Directory) -> list[CellStatus]:
    """Every cell, each probed now, with its tenants."""
    cells = await run_in_threadpool(directory.cells)
    counts = await run_in_threadpool(directory.tenants_per_cell)
    health = await asyncio.gather(*(probe(http, cell) for cell in cells))
    return [
        CellStatus(**cell.model_dump(), up=up, tenants=counts.get(cell.name, 0))
        for cell, up in zip(cells, health, strict=True)
    ]


async def list_cells(http: httpx.AsyncClient, directory: Directory) -> Response:
    listing = CellListing(items=await cell_statuses(http, directory))
    return JSONResponse(listing.model_dump(mode="json"))


async def create_cell(request: Request, directory: Directory) -> Response:
    try:
        given = CellCreate.model_validate_json(await body_of(request))
    except ValidationError as error:
        return herder_problem(Invalid.from_errors(error.errors()))
    cell = await run_in_threadpool(
        directory.create_cell, given.name, given.region, given.api_url, datetime.now(UTC)
    )
    return JSONResponse(
        cell.model_dump(mode="json"),
        status_code=201,
        headers={"Location": f"/v1/cells/{cell.name}"},
    )


async def create_tenant(
    http: httpx.AsyncClient, request: Request, directory: Directory, cell: Cell
) -> tuple[Response, str | None]:
    """The tenant made by ``cell`` and placed there: the cell's answer, and the tenant's id
    when it was made."""
    headers = {**authorization_of(request), "Content-Type": "application/json"}
    answer = await ask(
        http, cell, "POST", "/v1/tenants", content=await body_of(request), headers=headers
    )
    if answer.status_code != 201:
        return passed_on(answer), None
    tenant_id = str(answer.json()["id"])
    placed = await run_in_threadpool(directory.place, [tenant_id], cell.name, datetime.now(UTC))
    if placed.elsewhere:  # a cell that answered with another cell's tenant: never moved so
        raise Unavailable(
            f"cell {cell.name} answered with tenant {tenant_id}, which lives in another cell"
        )
    return Response(answer.content, status_code=201, media_type="application/json"), tenant_id


async def adopt(
    http: httpx.AsyncClient, request: Request, directory: Directory, cell: Cell
) -> tuple[Response, list[str]]:
    """Places every tenant ``cell`` lists that the directory lacks (those made there before
    cells, or made without the edge); listing them takes a system admin's key of that cell.
    Tenants the directory places in another cell are named, not moved."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        params = {"limit": str(ADOPT_PAGE), **({"cursor": cursor} if cursor else {})}
        answer = await ask(
            http, cell, "GET", "/v1/tenants", params=params, headers=authorization_of(request)
        )
        if answer.status_code != 200:
            return passed_on(answer), []
        page = answer.json()
        ids += [str(tenant["id"]) for tenant in page["items"]]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    placed = await run_in_threadpool(directory.place, ids, cell.name, datetime.now(UTC))
    body = {
        "cell": cell.name,
        "placed": [one.tenant_id for one in placed.new],
        "elsewhere": placed.elsewhere,
    }
    return JSONResponse(body), [one.tenant_id for one in placed.new]


def no_default_cell() -> Response:
    return problem(
        503,
        "Service unavailable",
        "the directory has no default cell yet: start the edge with --default-cell-url",
        headers={"Retry-After": "1"},
    )
