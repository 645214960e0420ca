"""/docs (Swagger UI) and /redoc (ReDoc), served whole by this process.

FastAPI's own pages load their scripts from a CDN, so on a machine without internet they are
blank. Here the scripts, the stylesheet and the icon come from the installed
``fastapi-offline`` package's static directory, mounted at ``/docs/assets``: no third-party
JavaScript is kept in this repository, and the pages ask nothing of any other host (Swagger
UI's validator badge, which calls one, is switched off; ReDoc goes without Google Fonts).

Like /healthz the pages need no key and are not in the OpenAPI document: they show only what
/openapi.json shows anyone.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs/assets"


def install_docs_ui(app: FastAPI) -> None:
    """Serve /docs and /redoc from local assets (the app is made with ``docs_url=None`` and
    ``redoc_url=None``, so FastAPI's CDN pages are not there)."""
    assets = StaticFiles(packages=[("fastapi_offline", "static")])
    app.mount(ASSETS_PATH, assets, name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = _root_path(request)
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = _root_path(request)
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )


def _root_path(request: Request) -> str:
    """The prefix a reverse proxy serves the API under, so the pages' URLs go through it."""
    return str(request.scope.get("root_path", ""))
