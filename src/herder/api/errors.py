"""The one place errors become HTTP problem documents (RFC 9457).

Only what the client sent is answered 422. A pydantic ``ValidationError`` raised anywhere
else (a stored row its model refuses, a response that fails its declared model) is a server
bug: logged with its traceback and answered 500, never blamed on the client.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

from herder.domain.errors import HerderError, RateLimited

PROBLEM_TYPE = "application/problem+json"
log = logging.getLogger("herder.api")
M = TypeVar("M", bound=BaseModel)


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


def _field_path(location: tuple[int | str, ...]) -> str:
    parts = [str(part) for part in location if part not in ("body", "query", "path", "header")]
    return ".".join(parts) or str(location[-1] if location else "body")


def herder_problem(error: HerderError) -> JSONResponse:
    """The problem document of one of our errors; a 422 lists its field in ``errors`` as
    request validation does, so every 422 has the same shape."""
    extra: dict[str, Any] = {}
    if error.field:
        extra["field"] = error.field
        if error.status == 422:
            extra["errors"] = [{"field": error.field, "message": error.detail}]
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    if isinstance(error, RateLimited):
        headers = {"Retry-After": str(error.retry_after_header)}
        extra.update(
            retry_after_seconds=error.retry_after_header,
            rate_per_second=error.rate,
            burst=error.burst,
        )
    return problem(error.status, error.title, error.detail, headers=headers, **extra)


async def _herder_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HerderError)
    return herder_problem(error)


def client_input(model: type[M], data: object) -> M:
    """``data`` as ``model``, for input the client sent that FastAPI could not validate on
    its own (a PATCH merged onto stored values): its errors are the client's (422)."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise RequestValidationError(error.errors(include_url=False)) from error


async def _validation_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    errors = [
        {
            "field": _field_path(tuple(item["loc"])),
            "message": item["msg"].removeprefix("Value error, "),
        }
        for item in error.errors()
    ]
    detail = "; ".join(f"{item['field']}: {item['message']}" for item in errors)
    return problem(422, "Invalid request", detail, errors=errors)


async def _http_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    return problem(error.status_code, str(error.detail), str(error.detail), headers=error.headers)


async def _unexpected(_request: Request, error: Exception) -> JSONResponse:
    log.exception("unexpected error", exc_info=error)
    return problem(500, "Internal error", "the server hit an unexpected error; it was logged")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(HerderError, _herder_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
