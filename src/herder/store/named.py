"""A tenant's named definitions (triggers, hooks…): created under a name unique to the
tenant, found by id or name (names are lower case, ids are not, so the two never meet),
listed newest first, changed in one transaction under a version, deleted."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Table, delete, exc, insert, or_, select, update

from herder.domain.errors import Conflict, NotFound, StaleVersion
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.store.owned import MAX_SHOWN_CHARS
from herder.store.pagination import page_of

T = TypeVar("T")


class NamedRows(Generic[T]):
    """The rows of ``table`` (id, tenant_id, name, created_at, updated_at, version and
    the kind's own columns) as ``record``s, for the kind called ``noun``."""

    def __init__(self, table: Table, noun: str, record: Callable[[Any], T]) -> None:
        self.table = table
        self.noun = noun
        self.record = record

    def insert(
        self,
        connection: Connection,
        tenant_id: str,
        row_id: str,
        name: str,
        columns: Mapping[str, Any],
        now: datetime,
    ) -> T:
        try:
            connection.execute(
                insert(self.table).values(
                    id=row_id, tenant_id=tenant_id, name=name, created_at=now, updated_at=now,
                    version=1, **columns,
                )
            )  # fmt: skip
        except exc.IntegrityError as error:
            raise Conflict(f"a {self.noun} named {name!r} already exists", field="name") from error
        return self.record(self.row(connection, tenant_id, row_id))

    def row(
        self, connection: Connection, tenant_id: str, wanted: str, *, for_update: bool = False
    ) -> Any:
        """The tenant's row of this id or name; another tenant's is not found."""
        table = self.table
        query = select(table).where(
            table.c.tenant_id == tenant_id, or_(table.c.id == wanted, table.c.name == wanted)
        )
        row = connection.execute(query.with_for_update() if for_update else query).first()
        if row is None:
            raise NotFound(f"{self.noun} {wanted[:MAX_SHOWN_CHARS]} not found")
        return row

    def page(self, connection: Connection, tenant_id: str, page: PageRequest) -> Page[T]:
        query = select(self.table).where(self.table.c.tenant_id == tenant_id)
        return page_of(connection, query, self.table.c.id, self.record, page)

    def edit(
        self,
        connection: Connection,
        tenant_id: str,
        wanted: str,
        change: Callable[[Any], Mapping[str, Any]],
        now: datetime,
        *,
        if_version: frozenset[int] | None = None,
    ) -> T:
        """Read, decide (``change``: the row → the columns to write) and write, the row held;
        the version goes up by one. With ``if_version``, only if it is still at one of them."""
        current = self.row(connection, tenant_id, wanted, for_update=True)
        if if_version is not None and current.version not in if_version:
            raise StaleVersion(
                f"{self.noun} {current.name} is at version {current.version} now, not the one "
                "this change was made to; read it again",
                current_version=current.version,
            )
        connection.execute(
            update(self.table)
            .where(self.table.c.id == current.id, self.table.c.version == current.version)
            .values(**change(current), updated_at=now, version=current.version + 1)
        )
        return self.record(self.row(connection, tenant_id, current.id))

    def delete(self, connection: Connection, tenant_id: str, wanted: str) -> Any:
        """Delete the row; the row as it was."""
        current = self.row(connection, tenant_id, wanted, for_update=True)
        connection.execute(delete(self.table).where(self.table.c.id == current.id))
        return current
