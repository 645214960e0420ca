"""The API's requests as spans (docs/traces.md): an ASGI middleware, installed only while
tracing is on, that makes each HTTP request a server span, current while the app answers
(so its log lines carry its trace id, and a submit's run links to it). Named by the matched
route's template (``POST /v1/jobs/{job_id}/runs``), never the path asked for, whose ids
would make a name each; a caller's ``traceparent`` is its parent. Its attributes say what a
person reading the trace needs and nothing a key could be read from: the method, the
route, the status and the caller's tenant id. Health probes and heartbeats are left out.

The edge's requests are spans the same way, described by the edge (``edge/span_names.py``:
the route it matched or forwarded to, the cell and its region)."""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry import propagate
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herder.telemetry import tracing
from herder.telemetry.latency import METHODS, OTHER_METHOD, UNMATCHED

PROBES = frozenset({"/healthz", "/readyz"})
# What a request was, once answered: its route (the span's name after the method), and the
# span's attributes (their values from small sets, or ids: never a path, a header, a key)
Described = tuple[str, dict[str, tracing.AttributeValue]]


def api_request(scope: Scope) -> Described:
    """An API request: its matched route's template, and its caller's tenant (its key read)."""
    route = getattr(scope.get("route"), "path", UNMATCHED)
    attributes: dict[str, tracing.AttributeValue] = {"http.route": route}
    principal = scope.get("state", {}).get("principal")
    if principal is not None:
        attributes["herder.tenant.id"] = principal.tenant_id
    return route, attributes


def _untraced(path: str) -> bool:
    """Health probes and workers' heartbeats: a span every few seconds from each load
    balancer and worker would bury the requests people look for."""
    return path in PROBES or (path.startswith("/v1/workers/") and path.endswith("/heartbeat"))


class RequestSpans:
    def __init__(self, app: ASGIApp, described: Callable[[Scope], Described] = api_request) -> None:
        self.app = app
        self.described = described

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _untraced(scope["path"]):
            await self.app(scope, receive, send)
            return
        await self._traced(scope, receive, send)

    async def _traced(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracer = tracing.tracer()
        if tracer is None:  # shut down since the app was made (tests)
            await self.app(scope, receive, send)
            return
        method = scope["method"] if scope["method"] in METHODS else OTHER_METHOD
        headers = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope.get("headers", [])
            if name in (b"traceparent", b"tracestate")
        }
        status = 500  # what the server answers if the app raises before it responds

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with tracer.start_as_current_span(
            method, context=propagate.extract(headers), kind=SpanKind.SERVER,
            attributes={"http.request.method": method},
        ) as span:  # fmt: skip
            try:
                await self.app(scope, receive, noting_status)
            finally:
                route, attributes = self.described(scope)
                span.update_name(f"{method} {route}")
                span.set_attributes(attributes)
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
