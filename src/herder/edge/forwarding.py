"""A request sent on to its cell and the cell's answer sent back, both bodies streamed:
hop-by-hop headers (and any the ``Connection`` header names) dropped both ways, the
client's address appended to ``X-Forwarded-For``, the path and query passed as they came
(the cell decodes and refuses them as it would unproxied). A cell that refuses the
connection, does not answer in time or answers 503 is down: 503 naming it, with
Retry-After, never another cell's answer — but for a 503 that names a cell itself (a tenant
moving to it, or moved there), passed on as it is. Every answer names the cell it is from
or about (``Herder-Cell``, ``Herder-Region``, set here over any a cell sent)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from herder.api.errors import UNAVAILABLE_RETRY_AFTER_SECONDS, problem
from herder.domain.cells import CELL_HEADER, REGION_HEADER, Cell
from herder.telemetry import tracing

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
MAX_UNAVAILABLE_BODY = 64 * 1024  # a cell's 503 read to quote its reason
TRACE_CONTEXT = frozenset({b"traceparent", b"tracestate"})  # W3C's: set by the edge when on
_NAMING = frozenset({CELL_HEADER.lower().encode(), REGION_HEADER.lower().encode()})


class Unavailability(StrEnum):
    """Why the edge answered 503 naming a cell."""

    DOWN = "down"  # it refused the connection, was silent, or answered 503 itself
    MOVING = "moving"  # the tenant is moving to another cell, or has moved


@dataclass(frozen=True)
class Forwarded:
    """A request's answer, the cell it is from or about, and why that cell could not answer
    (None: it did)."""

    response: Response
    cell: Cell
    unavailable: Unavailability | None = None


def naming(response: Response, cell: Cell) -> Response:
    """``response`` saying which cell it is from or about, in place of anything a cell said."""
    kept = [(name, value) for name, value in response.raw_headers if name.lower() not in _NAMING]
    response.raw_headers[:] = [  # in place: the response's ``headers`` view reads this list
        *kept,
        (CELL_HEADER.encode(), cell.name.encode()),
        (REGION_HEADER.encode(), cell.region.encode()),
    ]
    return response


def end_to_end(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` without the hop-by-hop ones, those ``Connection`` names among them."""
    listed = list(headers)
    named = {
        token.strip().lower()
        for name, value in listed
        if name.lower() == b"connection"
        for token in value.split(b",")
    }
    return [
        (name, value)
        for name, value in listed
        if name.lower().decode("latin-1") not in HOP_BY_HOP and name.lower() not in named
    ]


def to_cell_headers(request: Request) -> list[tuple[bytes, bytes]]:
    """What the cell is sent: the end-to-end headers but ``Host`` (the cell's own is set)
    and ``X-Herder-Target-Key`` (a move's other key: never shown to a cell it is not of),
    and the client's address after any ``X-Forwarded-For`` it sent. A body sent chunked
    goes on chunked: a ``Content-Length`` beside it (a request smuggled past a proxy that
    believes the length) is dropped. While tracing is on, the trace context is the edge's
    span's (a child of the client's, if it sent one), so the cell's span is its child."""
    left_out = {b"host", b"x-forwarded-for", b"x-herder-target-key"}
    if "transfer-encoding" in request.headers:
        left_out.add(b"content-length")
    trace_context = tracing.trace_context()
    if trace_context:
        left_out |= TRACE_CONTEXT
    kept = [
        (name, value)
        for name, value in end_to_end(request.scope["headers"])
        if name.lower() not in left_out
    ]
    forwarded = [
        value for name, value in request.scope["headers"] if name.lower() == b"x-forwarded-for"
    ]
    client = request.client.host if request.client else "unknown"
    forwarded.append(client.encode("latin-1"))
    kept.append((b"x-forwarded-for", b", ".join(forwarded)))
    return kept + trace_context


def cell_unavailable(cell: Cell, why: str) -> Response:
    return naming(
        problem(
            503,
            "Service unavailable",
            f"cell {cell.name} is unavailable: {why}",
            headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER_SECONDS)},
            cell=cell.name,
        ),
        cell,
    )


def _down(cell: Cell, why: str) -> Forwarded:
    return Forwarded(cell_unavailable(cell, why), cell, Unavailability.DOWN)


def _has_body(request: Request) -> bool:
    headers = request.headers
    return "transfer-encoding" in headers or headers.get("content-length", "0") not in ("", "0")


def _outgoing(
    http: httpx.AsyncClient, request: Request, cell: Cell, *, body: bool
) -> httpx.Request:
    base = httpx.URL(cell.api_url)
    query = request.scope["query_string"]
    # the request line as it came (after the cell's own prefix): httpx would resolve a
    # dot segment in a URL, and the cell, not the edge, says what a path means
    target = (
        base.raw_path.rstrip(b"/") + request.scope["raw_path"] + (b"?" + query if query else b"")
    )
    return http.build_request(
        request.method,
        base,
        headers=to_cell_headers(request),
        content=request.stream() if body and _has_body(request) else None,
        extensions={"target": target},
    )


async def forward(http: httpx.AsyncClient, request: Request, cell: Cell) -> Forwarded:
    outgoing = _outgoing(http, request, cell, body=True)
    try:
        answer = await http.send(outgoing, stream=True)
    except httpx.TimeoutException:
        return _down(cell, "it did not answer in time")
    except httpx.TransportError as error:
        return _down(cell, f"it cannot be reached ({type(error).__name__})")
    if answer.status_code == 503:
        return await _unavailable_answer(cell, answer)
    return Forwarded(_streamed(answer, cell), cell)


async def forward_reading(
    http: httpx.AsyncClient, request: Request, cells: list[Cell]
) -> Forwarded:
    """A read (no body) sent to each of ``cells`` in turn until one answers other than 404:
    a moved tenant's history, asked of the cells it lived in before."""
    *earlier, last = cells
    for cell in earlier:
        try:
            answer = await http.send(_outgoing(http, request, cell, body=False), stream=True)
        except httpx.TransportError as error:
            return _down(cell, f"it cannot be reached ({type(error).__name__})")
        if answer.status_code != 404:
            if answer.status_code == 503:
                return await _unavailable_answer(cell, answer)
            return Forwarded(_streamed(answer, cell), cell)
        await answer.aclose()
    return await forward(http, request, last)


def _streamed(answer: httpx.Response, cell: Cell) -> Response:
    response = StreamingResponse(
        answer.aiter_raw(), status_code=answer.status_code, background=BackgroundTask(answer.aclose)
    )
    response.raw_headers = end_to_end(answer.headers.raw)  # repeated ones kept, as they came
    return naming(response, cell)


async def _unavailable_answer(cell: Cell, answer: httpx.Response) -> Forwarded:
    """The cell's own 503 (its database lost, say), said as the cell's unavailability."""
    body = b""
    try:
        async for chunk in answer.aiter_bytes():
            body += chunk
            if len(body) > MAX_UNAVAILABLE_BODY:
                break
    except httpx.HTTPError:
        pass
    finally:
        await answer.aclose()
    try:
        problem_body = json.loads(body)
        detail = str(problem_body["detail"])
    except (ValueError, KeyError, TypeError):
        problem_body, detail = {}, "it answered 503"
    if isinstance(problem_body, dict) and isinstance(problem_body.get("cell"), str):
        # a tenant moving, or moved: its own word
        response = problem(503, "Service unavailable", detail, cell=problem_body["cell"])
        forwarded = Forwarded(naming(response, cell), cell, Unavailability.MOVING)
    else:
        forwarded = _down(cell, detail)
    if retry_after := answer.headers.get("retry-after"):
        forwarded.response.headers["Retry-After"] = retry_after
    return forwarded
