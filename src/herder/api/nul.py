"""NUL characters are refused wherever a request carries text: in the path, the query
string, a header, or any string (or key) of a JSON body, with 422 naming where (except by
a route that reads no input at all).

PostgreSQL cannot store a NUL in text (the request failed with 500 there), SQLite stores
it and the worker fails much later (``embedded null byte``, the run lost with a wrong
reason). No field of the API has a use for one, so one check at the edge covers every route
and every field, present and future, instead of a validator per field. Multipart uploads
carry binary programs and are not scanned; their file name is checked by the route.

A lone UTF-16 surrogate in a JSON string (``"\ud800"``, half of a pair) is refused alike:
JSON can spell it, Python decodes it, but no UTF-8 text (PostgreSQL's, a log's, a child
process's environment) can hold it, so it failed deep inside as a 500.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI
from starlette.types import Message, Receive, Scope, Send

from herder.api.errors import herder_problem
from herder.api.limits import is_raw_upload
from herder.api.middleware import HttpMiddleware
from herder.domain.errors import HerderError, Invalid

NUL = "\x00"
_MAYBE_NUL = (b"\x00", b"\\u0000")  # raw, or as JSON writes it
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")  # an escape of a surrogate half


NUL_CHARACTER = "a NUL character (\\u0000)"
LONE_SURROGATE = "a lone UTF-16 surrogate (half of a pair, \\ud800-\\udfff)"


def _message(where: str, what: str = NUL_CHARACTER) -> str:
    return f"{where} contains {what}, which no field accepts"


def _unstorable(text: str) -> str | None:
    """What in ``text`` no field can hold, if anything."""
    if NUL in text:
        return NUL_CHARACTER
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a surrogate no pair completed
        return LONE_SURROGATE
    return None


def _nul_in_json(value: object, path: str = "") -> tuple[str, str] | None:
    """The dotted path of the first string or key holding a NUL or a lone surrogate, and
    which, or None."""
    if isinstance(value, str):
        what = _unstorable(value)
        return None if what is None else (path or "body", what)
    items: list[tuple[object, object]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    for key, item in items:
        where = f"{path}.{key}" if path else str(key)
        what = _unstorable(key) if isinstance(key, str) else None
        if what is not None:
            return path or "body", what
        found = _nul_in_json(item, where)
        if found is not None:
            return found
    return None


def _path_parameter(scope: Scope) -> str:
    """The name of the path parameter that holds the NUL, found among the app's documented
    path templates; "path" when none fits."""
    segments = scope["path"].split("/")
    app = scope.get("app")
    templates: dict[str, object] = app.openapi()["paths"] if isinstance(app, FastAPI) else {}
    for template in templates:
        parts = template.split("/")
        if len(parts) != len(segments):
            continue
        names = [
            part[1:-1]
            for part, segment in zip(parts, segments, strict=True)
            if part.startswith("{") and NUL in segment
        ]
        literal = all(
            part == segment
            for part, segment in zip(parts, segments, strict=True)
            if not part.startswith("{")
        )
        if literal and names:
            return names[0]
    return "path"


def _nul_outside_body(scope: Scope) -> Invalid | None:
    if NUL in scope["path"]:
        name = _path_parameter(scope)
        where = "the path" if name == "path" else f"path parameter {name!r}"
        return Invalid(_message(where), field=name)
    query = scope["query_string"]
    if b"\x00" in query or b"%00" in query:
        for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if NUL in name or NUL in value:
                field = name if NUL not in name else "query"
                return Invalid(_message(f"query parameter {field!r}"), field=field)
    for name, value in scope["headers"]:
        if b"\x00" in value:
            header = name.decode("latin-1")
            return Invalid(_message(f"header {header!r}"), field=header)
    return None


def nul_in_body(body: bytes) -> Invalid | None:
    """What in a JSON body no field can hold (a NUL, a lone surrogate), named, or None."""
    if not any(marker in body for marker in _MAYBE_NUL) and not _MAYBE_SURROGATE.search(body):
        return None
    try:
        found = _nul_in_json(json.loads(body))
    except ValueError:  # not JSON: the route refuses it anyway, unless it is a raw NUL
        found = ("body", NUL_CHARACTER) if b"\x00" in body else None
    except RecursionError:  # nested too deep to walk, with a marker in it: refused whole
        found = ("body", "a character no field accepts")
    return None if found is None else Invalid(_message(*found), field=found[0])


class NulGuard(HttpMiddleware):
    """Sits inside ``BodyLimit``, so the body it reads is bounded."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = _nul_outside_body(scope)
        content_type = dict(scope["headers"]).get(b"content-type", b"").lower()
        raw = content_type.startswith(b"multipart/") or is_raw_upload(scope)
        if refused is None and not raw:
            try:
                body = await _read_body(receive)
            except HerderError as error:  # too large, from BodyLimit
                await herder_problem(error)(scope, receive, send)
                return
            refused = nul_in_body(body)
            receive = _replay(body, receive)
        if refused is not None and _reads_input(scope):
            await herder_problem(refused)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _reads_input(scope: Scope) -> bool:
    """Whether the route the request is for may answer 422, as the OpenAPI document says
    (``openapi.derived_statuses``): a route that reads nothing (``/healthz``) ignores a NUL
    as it ignores the rest. A path the document does not name is refused as before."""
    app = scope.get("app")
    paths: dict[str, dict[str, Any]] = app.openapi()["paths"] if isinstance(app, FastAPI) else {}
    operation = paths.get(scope["path"], {}).get(scope["method"].lower())
    return operation is None or "422" in operation["responses"]


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body once more for the app, then the client's own messages (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
