"""The one place errors become HTTP problem documents (RFC 9457): ``PROBLEMS`` gives each
domain error class its status and title (the domain knows nothing of HTTP).

Only what the client sent is answered 422: FastAPI's request validation, and the domain's
``Invalid`` (the use cases raise it for input FastAPI cannot check alone, such as a PATCH
merged onto stored values). A pydantic ``ValidationError`` raised anywhere else (a stored row
its model refuses, a response that fails its declared model) is a server bug: logged with its
traceback and answered 500, never blamed on the client.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from herder.domain.errors import (
    Conflict,
    FieldError,
    Forbidden,
    Gone,
    HerderError,
    Invalid,
    NotFound,
    RateLimited,
    StaleVersion,
    TemporarilyUnavailable,
    TenantMoving,
    TooLarge,
    Unauthorized,
    Unavailable,
)

PROBLEM_TYPE = "application/problem+json"
log = logging.getLogger("herder.api")

PROBLEMS: dict[type[HerderError], tuple[int, str]] = {
    Unauthorized: (401, "Unauthorized"),
    Forbidden: (403, "Forbidden"),
    NotFound: (404, "Not found"),
    Conflict: (409, "Conflict"),
    Gone: (410, "Gone"),
    StaleVersion: (412, "Precondition failed"),
    TooLarge: (413, "Request too large"),
    Invalid: (422, "Invalid request"),
    RateLimited: (429, "Too many requests"),
    Unavailable: (503, "Service unavailable"),
}
INTERNAL = (500, "Internal error")  # a HerderError of no class above: our bug
# A 503's Retry-After when the store is lost for a moment (a failover takes seconds), and a client
# that waits this long between tries sees it back soon without flooding a recovering server.
UNAVAILABLE_RETRY_AFTER_SECONDS = 1


def status_and_title(error: type[HerderError]) -> tuple[int, str]:
    """The HTTP status and title of an error class (or of its nearest mapped ancestor)."""
    for kind in error.__mro__:
        if kind in PROBLEMS:
            return PROBLEMS[kind]
    return INTERNAL


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type=PROBLEM_TYPE, headers=headers)


def _field_errors(errors: list[FieldError]) -> list[dict[str, str]]:
    return [{"field": item.field, "message": item.message} for item in errors]


def herder_problem(error: HerderError) -> JSONResponse:
    """The problem document of one of our errors; a 422 lists its fields in ``errors`` as
    request validation does, so every 422 has the same shape."""
    status, title = status_and_title(type(error))
    extra: dict[str, Any] = {}
    if error.field:
        extra["field"] = error.field
    if isinstance(error, Invalid) and error.errors:
        extra["errors"] = _field_errors(error.errors)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(error, RateLimited):
        headers = {"Retry-After": str(error.retry_after_header)}
        extra.update(
            retry_after_seconds=error.retry_after_header,
            rate_per_second=error.rate,
            burst=error.burst,
        )
    if isinstance(error, TemporarilyUnavailable):
        headers = {"Retry-After": str(UNAVAILABLE_RETRY_AFTER_SECONDS)}
    if isinstance(error, TenantMoving):
        headers = {"Retry-After": str(error.retry_after_seconds)}
        extra["cell"] = error.cell
    if isinstance(error, StaleVersion):
        extra["current_version"] = error.current_version
    return problem(status, title, error.detail, headers=headers, **extra)


async def _herder_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HerderError)
    return herder_problem(error)


async def _validation_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    return herder_problem(Invalid.from_errors(error.errors()))


async def _http_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    if isinstance(error.__cause__, RecursionError):  # FastAPI's 400 for a body json can't parse
        return herder_problem(
            Invalid("the body is JSON nested too deeply to read (arrays and objects)", field="body")
        )
    return problem(error.status_code, str(error.detail), str(error.detail), headers=error.headers)


async def _unexpected(_request: Request, error: Exception) -> JSONResponse:
    log.exception("unexpected error", exc_info=error)
    return problem(500, "Internal error", "the server hit an unexpected error; it was logged")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(HerderError, _herder_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
