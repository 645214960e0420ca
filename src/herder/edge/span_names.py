"""The edge's requests as spans (docs/traces.md, "The edge's requests"), described for
``telemetry.request_spans``, which makes each one a span while tracing is on.

A forwarded request is named as the cell's own span of it is: by the API's route template
its path matches (``GET /v1/runs/{run_id}``), from the routes of this release; a path no
route of them matches (a newer cell's route, a path that is no route at all) is
``METHOD forward``. Never the path as asked, nor anything a client sends beyond the method
(``other`` for one not in the API's set): a span's name is one of a fixed set, whatever
comes. The edge's own routes are named by theirs. Attributes: the route matched, and the
cell the request went to with its region (from the directory); no tenant (the key's tenant
part is only a claim until the cell checks it: the cell's span names the tenant it admitted)
and nothing of a header, a key or a body."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.routing import Route
from starlette.types import Scope

from herder.domain.cells import Cell
from herder.telemetry.latency import METHODS, OTHER_METHOD
from herder.telemetry.request_spans import Described
from herder.telemetry.tracing import AttributeValue

FORWARDED = "forward"  # a forwarded request whose path no route of the API's matches
FORWARDING_ROUTE = "/{path:path}"  # the edge's route for every request it forwards


@dataclass(frozen=True)
class Template:
    """A route of the API: its path template, its pattern, the methods it answers."""

    path: str
    pattern: re.Pattern[str]
    methods: frozenset[str]


class SpanNames:
    def __init__(self, templates: Iterable[Template]) -> None:
        self._templates = tuple(templates)
        # a path is tried against the templates of its first two segments only, and those
        # with a parameter there, in the API's order (a few, not 150: under 10 µs a request)
        general = [t for t in self._templates if _prefix(t.path) is None]
        prefixed: dict[tuple[str, str], list[Template]] = {}
        for template in self._templates:
            if (prefix := _prefix(template.path)) is not None:
                prefixed.setdefault(prefix, []).append(template)
        order = {template: index for index, template in enumerate(self._templates)}
        self._general = tuple(general)
        self._by_prefix = {
            prefix: tuple(sorted([*found, *general], key=order.__getitem__))
            for prefix, found in prefixed.items()
        }

    @classmethod
    def of_the_api(cls) -> SpanNames:
        """The API's routes, in the order the cell matches them (imported here, once, only
        while tracing is on)."""
        from herder.api.app import ROUTERS
        from herder.api.dashboard import router as dashboard

        return cls(
            Template(route.path, route.path_regex, frozenset(route.methods or ()))
            for router in (*ROUTERS, dashboard)
            for route in router.routes
            if isinstance(route, Route)  # the worker's WebSocket never passes the edge
        )

    @property
    def routes(self) -> frozenset[str]:
        """Every name a forwarded request's span may take after its method, ``forward`` too."""
        return frozenset({*(template.path for template in self._templates), FORWARDED})

    def route_of(self, method: str, path: str) -> str | None:
        """The template ``path`` matches, the one answering ``method`` first (as the cell
        picks it); None for none."""
        partial = None
        for template in self._by_prefix.get(_prefix(path) or ("", ""), self._general):
            if template.pattern.match(path):
                if method in template.methods:
                    return template.path
                partial = partial or template.path
        return partial

    def described(self, scope: Scope) -> Described:
        """A request to the edge, once answered: its route, the cell and its region."""
        route = getattr(scope.get("route"), "path", None)
        attributes: dict[str, AttributeValue] = {}
        if route == FORWARDING_ROUTE:
            method = scope["method"] if scope["method"] in METHODS else OTHER_METHOD
            route = self.route_of(method, scope["path"])
        if route is not None:
            attributes["http.route"] = route
        cell = scope.get("state", {}).get("cell")
        if isinstance(cell, Cell):
            attributes["herder.cell"] = cell.name
            attributes["herder.region"] = cell.region
        return route or FORWARDED, attributes


def _prefix(path: str) -> tuple[str, str] | None:
    """A path's (or a template's) first two segments, when both are there and literal."""
    parts = path.split("/", 3)
    if len(parts) < 3 or "{" in parts[1] or "{" in parts[2]:
        return None
    return parts[1], parts[2]
