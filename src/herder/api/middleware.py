"""What Herder's own ASGI middleware share: each looks at HTTP requests only and passes the
rest (the lifespan, a websocket) through untouched."""

from __future__ import annotations

from abc import ABC, abstractmethod

from starlette.types import ASGIApp, Receive, Scope, Send


class HttpMiddleware(ABC):
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    @abstractmethod
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One HTTP request: answer it, or hand it on to ``self.app``."""
