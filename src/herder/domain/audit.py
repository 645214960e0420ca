"""The audit log's entries and how a call is named in it.

Every mutating ``/v1`` call made with an API key is recorded after it is answered: who (the
tenant, the key's id, name and role), what (an action named after the route, the object, the
names of the fields sent — never a value), when, and the HTTP status it ended with. Naming
comes from the route's template alone, so a route added later is covered without anyone
listing it:

    POST   /v1/jobs                      jobs.create        (the object: the new id)
    PATCH  /v1/jobs/{job_id}             jobs.update        DELETE …  jobs.delete
    PUT    /v1/workflows/{workflow_id}   workflows.put
    POST   /v1/runs/{run_id}/cancel      runs.cancel        (the object: the run)
    POST   /v1/tenants/{tenant_id}/keys  tenants.keys       (the object: the tenant)

Not recorded: one-off run submissions (their runs' events name the key that started them, and
they come at thousands a second) and calls that store nothing (a cron preview).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict, computed_field

from herder.domain.models import Role

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
UNAUDITED_ROUTES = frozenset(
    {
        ("POST", "/v1/jobs/{job_id}/runs"),  # run events record who started the run
        ("POST", "/v1/runs/batch"),  # likewise, per run
        ("POST", "/v1/cron/preview"),  # computes, stores nothing
        ("POST", "/v1/workflows/check"),  # likewise: the editor's, as its text is typed
        ("POST", "/auth/logout"),  # a person ending their own session (an admin's: audited)
    }
)
_VERBS = {"POST": "create", "PUT": "put", "PATCH": "update", "DELETE": "delete"}
_FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MAX_FIELDS = 64


@dataclass(frozen=True)
class AuditFilter:
    """Which entries a listing reads: each field given narrows it (``until`` excluded)."""

    since: datetime | None = None
    until: datetime | None = None
    object_type: str | None = None
    object_id: str | None = None
    key_id: str | None = None


class AuditEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    tenant_id: str
    key_id: str
    key_name: str
    role: Role
    action: str
    method: str
    route: str
    object_type: str
    object_id: str | None
    fields: list[str]  # names only
    status: int
    created_at: datetime
    # who, as ``domain.actors`` names them (a signed-in person's ``user:usr_…``; an entry from
    # before it was kept: ``user:<key_id>``), and their name now, added as the log is read
    actor: str = ""
    actor_name: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def outcome(self) -> str:
        if self.status < 400:
            return "succeeded"
        return "failed" if self.status >= 500 else "refused"


def is_audited(method: str, route: str) -> bool:
    return (
        method in MUTATING_METHODS
        and route.startswith("/v1/")
        and (method, route) not in UNAUDITED_ROUTES
    )


def _segments(route: str) -> list[str]:
    return route.removeprefix("/v1/").split("/")


def _is_parameter(segment: str) -> bool:
    return segment.startswith("{") and segment.endswith("}")


def action(method: str, route: str) -> str:
    """The action a call performs, named from its route's template (see the module's table)."""
    segments = _segments(route)
    literals = [segment for segment in segments if not _is_parameter(segment)]
    if method == "POST" and not _is_parameter(segments[-1]) and len(segments) > 1:
        return ".".join(literals)  # an action on an object, or a thing made under it
    return ".".join([*literals, _VERBS[method]])


def target(route: str, path_parameters: Mapping[str, str]) -> tuple[str, str | None]:
    """The object a call acts on: the route's first resource and the id that follows it."""
    segments = _segments(route)
    if len(segments) > 1 and _is_parameter(segments[1]):
        return segments[0], path_parameters.get(segments[1][1:-1])
    return segments[0], None


def field_names(body: object) -> list[str]:
    """The names of a JSON body's top-level fields, never their values; only names shaped
    like the API's own (a name that is not is left out, in case it is someone's data)."""
    if not isinstance(body, dict):
        return []
    names = sorted(name for name in body if isinstance(name, str) and _FIELD_NAME.match(name))
    return names[:MAX_FIELDS]
