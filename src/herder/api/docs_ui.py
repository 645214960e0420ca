"""/docs (Swagger UI) and /redoc (ReDoc), served whole by this process.

FastAPI's own pages load their scripts from a CDN, so on a machine without internet they are
blank. Here the scripts, the stylesheet and the icon come from the installed
``fastapi-offline`` package's static directory, mounted at ``/docs/assets``: no third-party
JavaScript is kept in this repository, and the pages ask nothing of any other host (Swagger
UI's validator badge, which calls one, is switched off; ReDoc goes without Google Fonts; its
footer's logo, from cdn.redoc.ly, is refused by the policy below).

Like /healthz the pages need no key and are not in the OpenAPI document: they show only what
/openapi.json shows anyone.

Each page carries a Content-Security-Policy allowing exactly what it loads: scripts and
stylesheets of this origin plus its own inline ``<script>``/``<style>`` blocks (by their
sha256), ``data:`` images (Swagger UI's icons), requests to this origin (the document, "Try
it out"), and ReDoc's search worker (a ``blob:``) and run-time styles (CSS-in-JS, so inline
styles there); nothing may frame them.
"""

from __future__ import annotations

import base64
import hashlib
import re

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs/assets"
_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)
_POLICY = (
    "default-src 'none'; script-src 'self' {scripts}; style-src 'self' {styles}; "
    "img-src 'self' data:; connect-src 'self'; worker-src {workers}; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'"
)


def install_docs_ui(app: FastAPI) -> None:
    """Serve /docs and /redoc from local assets (the app is made with ``docs_url=None`` and
    ``redoc_url=None``, so FastAPI's CDN pages are not there)."""
    assets = StaticFiles(packages=[("fastapi_offline", "static")])
    app.mount(ASSETS_PATH, assets, name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = _root_path(request)
        page = get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},
        )
        return _with_policy(page, inline_styles=False, workers="'none'")

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = _root_path(request)
        page = get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
        return _with_policy(page, inline_styles=True, workers="blob:")


def _root_path(request: Request) -> str:
    """The prefix a reverse proxy serves the API under, so the pages' URLs go through it."""
    return str(request.scope.get("root_path", ""))


def _with_policy(page: HTMLResponse, *, inline_styles: bool, workers: str) -> HTMLResponse:
    """The page with its Content-Security-Policy: its inline blocks allowed by hash."""
    hashes: dict[str, list[str]] = {"script": [], "style": []}
    for kind, content in _INLINE.findall(bytes(page.body).decode()):
        digest = base64.b64encode(hashlib.sha256(content.encode()).digest()).decode()
        hashes[kind].append(f"'sha256-{digest}'")
    styles = "'unsafe-inline'" if inline_styles else " ".join(hashes["style"])
    page.headers["Content-Security-Policy"] = _POLICY.format(
        scripts=" ".join(hashes["script"]), styles=styles, workers=workers
    )
    page.headers["X-Frame-Options"] = "DENY"
    page.headers["X-Content-Type-Options"] = "nosniff"
    return page
