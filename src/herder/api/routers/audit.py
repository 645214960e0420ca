"""/v1/audit: the tenant's audit log (``herder.domain.audit``), for its admins; the system
admins may read any tenant's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from herder.api.auth import Caller, StoreDep
from herder.api.openapi import problems
from herder.api.queries import CursorPaging, OtherTenant
from herder.api.schemas import IsoTime
from herder.app import audit
from herder.domain.audit import AuditEntry, AuditFilter
from herder.domain.models import Page

router = APIRouter(prefix="/v1/audit", tags=["administration"])
Text = Annotated[str | None, Query(max_length=255)]


@router.get("", responses=problems(404))
def list_audit(
    caller: Caller,
    store: StoreDep,
    page: CursorPaging,
    tenant_id: OtherTenant = None,
    since: Annotated[IsoTime | None, Query(description="entries at or after")] = None,
    until: Annotated[IsoTime | None, Query(description="entries before")] = None,
    object_type: Annotated[str | None, Query(max_length=64, description="e.g. jobs")] = None,
    object_id: Text = None,
    key_id: Annotated[str | None, Query(max_length=40)] = None,
) -> Page[AuditEntry]:
    """Who changed what and when, newest first: the action, the object, the names of the
    fields sent (never their values) and the status the call was answered with."""
    where = AuditFilter(since, until, object_type, object_id, key_id)
    return audit.list_entries(store, caller, tenant_id, where, page=page)
