"""``GET /`` (the page) and ``GET /ui/{path}`` (its scripts and stylesheet, and the states
module written from the domain), each with the headers that keep the page to its own code:
no inline script, no other origin, no framing."""

from __future__ import annotations

from importlib.resources import files
from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import Response

from herder.api.dashboard.state_module import PATH as STATES_PATH
from herder.api.dashboard.state_module import states_module
from herder.domain.errors import NotFound

router = APIRouter(include_in_schema=False)

STATIC = files("herder.api.dashboard") / "static"
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",  # revalidated, so an upgraded server's page is used at once
}
ASSET_PATH = r"^[a-z][a-z0-9_-]{0,63}(/[a-z][a-z0-9_-]{0,63})?\.(js|css|svg)$"


@router.get("/")
def index() -> Response:
    return _serve("index.html")


@router.get(f"/ui/{STATES_PATH}")
def states() -> Response:
    """Written from the domain (``state_module``), declared before the files it sits among."""
    return Response(states_module(), media_type=MEDIA_TYPES[".js"], headers=HEADERS)


@router.get("/ui/{path:path}")
def asset(path: Annotated[str, Path(pattern=ASSET_PATH)]) -> Response:
    """Only names of the shape the app's files have: no ``..``, no hidden files."""
    return _serve(path)


def _serve(path: str) -> Response:
    resource = STATIC.joinpath(*path.split("/"))
    if not resource.is_file():
        raise NotFound(f"no dashboard file {path}")
    media_type = MEDIA_TYPES[path[path.rindex(".") :]]
    return Response(resource.read_bytes(), media_type=media_type, headers=HEADERS)
