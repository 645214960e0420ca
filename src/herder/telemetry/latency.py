"""API latency by route: an ASGI middleware timing each HTTP request, labelled with the
matched route's template (``/v1/runs/{run_id}``) — never the path asked for, whose ids
would make a series each — its method and its status class."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herder.telemetry.metrics import request_served

UNMATCHED = "unmatched"  # no route: a 404 for an unknown path, or a mounted app's files
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER_METHOD = "other"  # a client may send any token as a method: never a series each


class RequestLatency:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        timed = self._timed if scope["type"] == "http" else self.app
        await timed(scope, receive, send)

    async def _timed(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500  # what the server answers if the app raises before it responds

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        finally:
            route = getattr(scope.get("route"), "path", UNMATCHED)
            method = scope["method"] if scope["method"] in METHODS else OTHER_METHOD
            request_served(route, method, f"{status // 100}xx", time.perf_counter() - started)
