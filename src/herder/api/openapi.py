"""The OpenAPI document describes every answer the API gives, and the credential each call
needs.

Each route's problems (RFC 9457, ``application/problem+json``, one ``Problem`` schema) and
its security requirement are derived from what the route is made of, so a new route is
described without anyone remembering to: its dependencies (a key: 401 and 403 and the
``bearerAuth`` scheme; the fleet's worker token or a registered worker's secret: their own
bearer schemes, and for a registered worker 404 and 410; the submission rate: 429; the
store: 503), its path parameters (404), its body (400, 413), and the edge checks a request
with any input passes (422; a route that takes no parameter, body or credential has none to
refuse). What only the route's own logic knows (409, 412, a 404 of an object named in the
body) it declares with ``responses=problems(...)``; a route whose credential is not a bearer
one (the signed inbound webhook) declares ``"security": []`` in its ``openapi_extra``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_flat_params
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict

from herder.api.auth import (
    get_store,
    principal,
    registered_worker,
    system_admin,
    worker_secret,
    worker_token,
)
from herder.api.auth import writer as writer_dependency
from herder.api.errors import PROBLEM_TYPE
from herder.api.ratelimit import submitter

PROBLEM_REF = "#/components/schemas/Problem"
DESCRIPTIONS = {
    400: "the body cannot be parsed at all (not UTF-8, or a broken multipart form)",
    401: "no key, or a key that is not known",
    403: "the key's role (or kind) may not do this",
    404: "no such object in the caller's tenant (another tenant's objects answer 404 too)",
    409: "the change conflicts with the object's current state",
    410: "the worker was declared lost: drop its attempts and register again",
    412: "the object changed since the version ``If-Match`` names (``current_version``): "
    "read it again and redo the change on what it is now",
    413: "the request body is over its limit",
    422: "the request breaks a rule; ``errors`` names each field at fault",
    429: "the tenant submits faster than its quota; retry after ``Retry-After`` seconds",
    503: "the store cannot serve this now: with ``Retry-After``, only for a moment",
}


class FieldError(BaseModel):
    field: str
    message: str


class Problem(BaseModel):
    """An RFC 9457 problem document; some carry more members (``field``, ``errors``, the
    rate limit's ``retry_after_seconds``)."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None
    errors: list[FieldError] | None = None
    retry_after_seconds: int | None = None
    rate_per_second: float | None = None
    burst: float | None = None
    current_version: int | None = None


ETAG_HEADER: dict[str, Any] = {
    "headers": {
        "ETag": {
            "required": True,
            "description": 'the version in quotes, e.g. "3": send it as If-Match to change '
            "the object only if it is still that version",
            "schema": {"type": "string"},
        }
    }
}


# The bearer credentials, each named by the dependency that checks it: the interactive docs
# (/docs) offer an "Authorize" field for each, and send it with every "Try it out".
SECURITY_SCHEMES: dict[str, dict[str, str]] = {
    "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "an API key (``key_…``): ``herder key create``, or the admin key "
        "``herder up`` prints; its role decides what it may do",
    },
    "workerToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "the fleet's worker token (``wtk_…``): it only registers a worker",
    },
    "workerSecret": {
        "type": "http",
        "scheme": "bearer",
        "description": "the worker's secret (``wks_…``), given to it at registration: "
        "every later call of that worker",
    },
}
_SCHEME_OF: dict[Callable[..., Any], str] = {
    principal: "bearerAuth",
    worker_token: "workerToken",
    worker_secret: "workerSecret",  # a report naming its worker in the body
    registered_worker: "workerSecret",  # the worker in the path
}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route decorator: these statuses answer a problem document."""
    return {status: _problem_response(status) for status in statuses}


def _retry_after(*, required: bool, when: str) -> dict[str, Any]:
    schema = {"type": "integer", "minimum": 1}
    return {"Retry-After": {"required": required, "description": when, "schema": schema}}


HEADERS = {
    401: {"WWW-Authenticate": {"required": True, "schema": {"type": "string", "enum": ["Bearer"]}}},
    429: _retry_after(required=True, when="whole seconds, at least 1"),
    503: _retry_after(required=False, when="the store is lost for a moment: try again then"),
}


def _problem_response(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": DESCRIPTIONS[status],
        "content": {PROBLEM_TYPE: {"schema": {"$ref": PROBLEM_REF}}},
    }
    if status in HEADERS:
        response["headers"] = HEADERS[status]
    return response


def patch_body(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra=`` for a PATCH that takes any subset of ``model``'s fields (the route
    reads the body as a dict, which alone would document any object at all)."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    schema.pop("required", None)
    schema.update(title=f"{model.__name__}Changes", additionalProperties=False)
    return {"requestBody": {"content": {"application/json": {"schema": schema}}}}


def _calls(dependant: Dependant) -> Iterator[Callable[..., Any] | None]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)


def credentials(route: APIRoute) -> list[str]:
    """The security schemes of the bearer credentials the route's dependencies check."""
    calls = set(_calls(route.dependant))
    return sorted({scheme for check, scheme in _SCHEME_OF.items() if check in calls})


def takes_input(route: APIRoute) -> bool:
    """Whether the route reads anything from a request: a parameter, a body or a credential
    (what the NUL guard and the validation could refuse with 422)."""
    parameters = get_flat_params(route.dependant)  # path, query, header and cookie
    return bool(parameters) or _has_body(route) or bool(credentials(route))


def _has_body(route: APIRoute) -> bool:
    return route.body_field is not None or "requestBody" in (route.openapi_extra or {})


def derived_statuses(route: APIRoute) -> set[int]:
    """The problems a route can answer because of what it is made of."""
    calls = set(_calls(route.dependant))
    statuses = {422} if takes_input(route) else set()
    if calls & {principal, worker_token, worker_secret}:
        statuses |= {401, 403}
    if calls & {writer_dependency, system_admin}:
        statuses.add(403)
    if registered_worker in calls:  # its secret, then the worker itself
        statuses |= {401, 403, 404, 410}
    if submitter in calls:
        statuses.add(429)
    if route.dependant.path_params:
        statuses.add(404)
    if _has_body(route):
        statuses |= {400, 413}
    if get_store in calls:
        statuses.add(503)
    return statuses


def describe_routes(router: APIRouter) -> None:
    """Add each route's derived problems to its responses, and the credentials it takes as
    its security requirement (one scheme of them suffices), unless the route declares its
    own; call before including it."""
    for route in router.routes:
        if isinstance(route, APIRoute):
            route.responses.update(problems(*sorted(derived_statuses(route))))
            schemes = credentials(route)
            if schemes:
                security: dict[str, Any] = {"security": [{scheme: []} for scheme in schemes]}
                route.openapi_extra = {**security, **(route.openapi_extra or {})}


# Documents built, by what they describe: the app's title, version and summary and the ids of
# its documented routes (held in the value, so an id is not reused while its entry lives).
_BUILT: dict[tuple[object, ...], tuple[tuple[APIRoute, ...], dict[str, Any]]] = {}
MAX_BUILT = 8  # a process makes apps of one route table; the tests of a few


def install_openapi(app: FastAPI) -> None:
    """Replace ``app.openapi`` with one whose components hold the ``Problem`` schema (and
    not FastAPI's validation error, which this API never answers) and the bearer schemes.

    Built once a process for every app of the same routes (``app.route_table`` shares them):
    building it takes about a second of CPU, and the NUL guard asks for it on the first
    request with a NUL, which every test's new app paid again (a fifth of a sample of the
    integration tests' CPU)."""
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            routes = tuple(
                route
                for route in app.routes
                if isinstance(route, APIRoute) and route.include_in_schema
            )
            key = (app.title, app.version, app.summary, *map(id, routes))
            if key not in _BUILT:
                while len(_BUILT) >= MAX_BUILT:
                    del _BUILT[next(iter(_BUILT))]
                _BUILT[key] = routes, _with_problems(plain())
            app.openapi_schema = _BUILT[key][1]
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _with_problems(document: dict[str, Any]) -> dict[str, Any]:
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(problem.pop("$defs", {}))
    schemas["Problem"] = problem
    document["components"]["securitySchemes"] = SECURITY_SCHEMES
    return document
