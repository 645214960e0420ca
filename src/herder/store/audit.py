"""The audit log (``herder.domain.audit``): written once per change, read newest first.

It grows with a tenant's changes, not its runs (run submissions are not in it); its rows carry
``created_at`` so that retention can drop the old ones with the rest of the history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select

from herder.clock import Clock, epoch_ms
from herder.domain.actors import user_actor
from herder.domain.audit import AuditEntry, AuditFilter
from herder.domain.ids import new_id
from herder.domain.listings import PageRequest
from herder.domain.models import Page, Principal
from herder.store.database import Database
from herder.store.pagination import page_of
from herder.store.schema import audit_log, tenants


@dataclass(frozen=True)
class AuditCall:
    """One answered call, as the API saw it, for ``tenant_id``'s log."""

    tenant_id: str
    caller: Principal
    action: str
    method: str
    route: str
    object_type: str
    object_id: str | None
    fields: list[str]
    status: int


class AuditRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def record(self, call: AuditCall) -> AuditEntry:
        entry = self._entry_of(call)
        with self._db.write() as connection:
            connection.execute(insert(audit_log).values(**_row(entry)))
        return entry

    def record_copy(self, call: AuditCall) -> AuditEntry | None:
        """``call`` filed also in the log of the tenant it acted on (``call.tenant_id``), if
        that tenant is in this cell: one arriving in a move is not until its import (its
        programs' bytes come before it), one whose import was taken back is no more. None
        when not filed: the caller's own log has the call either way. The tenant's row is
        held (``FOR KEY SHARE``) until the entry is in, so it cannot go meanwhile."""
        entry = self._entry_of(call)
        with self._db.write() as connection:
            here = connection.execute(
                select(tenants.c.id)
                .where(tenants.c.id == call.tenant_id)
                .with_for_update(key_share=True)
            ).first()
            if here is None:
                return None
            connection.execute(insert(audit_log).values(**_row(entry)))
        return entry

    def _entry_of(self, call: AuditCall) -> AuditEntry:
        now = self._clock.now()
        return AuditEntry(
            id=new_id("aud", epoch_ms(now)),
            tenant_id=call.tenant_id,
            key_id=call.caller.key_id,
            key_name=call.caller.key_name,
            role=call.caller.role,
            action=call.action,
            method=call.method,
            route=call.route,
            object_type=call.object_type,
            object_id=call.object_id,
            fields=call.fields,
            status=call.status,
            created_at=now,
            actor=call.caller.actor,
        )

    def list(
        self,
        tenant_id: str,
        where: AuditFilter = AuditFilter(),
        *,
        page: PageRequest = PageRequest(),
    ) -> Page[AuditEntry]:
        """The tenant's entries, newest first."""
        query = select(audit_log).where(audit_log.c.tenant_id == tenant_id)
        if where.since is not None:
            query = query.where(audit_log.c.created_at >= where.since)
        if where.until is not None:
            query = query.where(audit_log.c.created_at < where.until)
        if where.object_type is not None:
            query = query.where(audit_log.c.object_type == where.object_type)
        if where.object_id is not None:
            query = query.where(audit_log.c.object_id == where.object_id)
        if where.key_id is not None:
            query = query.where(audit_log.c.key_id == where.key_id)
        with self._db.read() as connection:
            return page_of(connection, query, audit_log.c.id, _entry, page)


def _row(entry: AuditEntry) -> dict[str, Any]:
    return entry.model_dump(exclude={"outcome", "actor_name"})


def _entry(row: Any) -> AuditEntry:
    values = dict(row._mapping)
    values["actor"] = values["actor"] or user_actor(values["key_id"])
    return AuditEntry.model_validate(values)
