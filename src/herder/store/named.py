"""The named definitions (limits, triggers, hooks, alert channels and rules, pools, secrets,
jobs, schedules): created under a name unique to the tenant (or, for a tenantless kind, to
the server), found by the keys the kind is found by (an id, a name, or either: names are
lower case, ids are not, so the two never meet), listed newest first, changed in one
transaction (under a version where the kind keeps one), renamed only to a free name,
deleted."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Table,
    and_,
    delete,
    exc,
    insert,
    or_,
    select,
    update,
)

from herder.domain.errors import Conflict, NotFound, StaleVersion
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.store.owned import MAX_SHOWN_CHARS
from herder.store.pagination import page_of

T = TypeVar("T")


class NamedRows(Generic[T]):
    """The rows of ``table`` (its keys, name, created_at, updated_at — version when it has
    one — and the kind's own columns) as ``record``s, for the kind called ``noun``.

    ``found_by``: the columns a wanted key is matched against; ``owned``: rows belong to a
    tenant (a tenantless kind is asked with ``tenant_id`` None); ``columns``: what a row is
    read with (default: all of it)."""

    def __init__(
        self,
        table: Table,
        noun: str,
        record: Callable[[Any], T],
        *,
        found_by: Sequence[str] = ("id", "name"),
        owned: bool = True,
        columns: Sequence[ColumnElement[Any]] = (),
    ) -> None:
        self.table = table
        self.noun = noun
        self.record = record
        self.found_by = tuple(table.c[name] for name in found_by)
        self.owned = owned
        self.columns = tuple(columns)
        self.versioned = "version" in table.c

    @contextmanager
    def _named(self, name: object) -> Iterator[None]:
        """A write that takes a name another row holds is a ``Conflict`` on ``name``."""
        try:
            yield
        except exc.IntegrityError as error:
            article = "an" if self.noun[0] in "aeiou" else "a"
            raise Conflict(
                f"{article} {self.noun} named {name!r} already exists", field="name"
            ) from error

    def insert(
        self,
        connection: Connection,
        tenant_id: str | None,
        row_id: str,
        name: str | None,
        columns: Mapping[str, Any],
        now: datetime,
    ) -> T:
        """Insert the row (a kind whose name is optional: ``name`` None, no name)."""
        values = {"id": row_id, "name": name, "created_at": now, "updated_at": now, **columns}
        if self.owned:
            values["tenant_id"] = tenant_id
        if self.versioned:
            values.setdefault("version", 1)
        with self._named(name):
            connection.execute(insert(self.table).values(**values))
        return self.record(self.row(connection, tenant_id, row_id))

    def _tenant(self, tenant_id: str | None) -> list[ColumnElement[bool]]:
        return [self.table.c.tenant_id == tenant_id] if self.owned else []

    def row(
        self,
        connection: Connection,
        tenant_id: str | None,
        wanted: str,
        *,
        for_update: bool = False,
        where: Sequence[ColumnElement[bool]] = (),
    ) -> Any:
        """The tenant's row of this key (that also meets ``where``); another tenant's is not
        found."""
        query = select(*self.columns) if self.columns else select(self.table)
        query = query.where(
            *self._tenant(tenant_id), or_(*(column == wanted for column in self.found_by)), *where
        )
        row = connection.execute(query.with_for_update() if for_update else query).first()
        if row is None:
            raise NotFound(f"{self.noun} {wanted[:MAX_SHOWN_CHARS]} not found")
        return row

    def get(self, connection: Connection, tenant_id: str | None, wanted: str) -> T:
        return self.record(self.row(connection, tenant_id, wanted))

    def page(
        self,
        connection: Connection,
        tenant_id: str | None,
        page: PageRequest,
        *,
        name: str | None = None,
        where: Sequence[ColumnElement[bool]] = (),
    ) -> Page[T]:
        """Newest first; with ``name``, only the row of that name."""
        query = select(self.table).where(*self._tenant(tenant_id), *where)
        if name is not None:
            query = query.where(self.table.c.name == name)
        return page_of(connection, query, self.table.c.id, self.record, page)

    def edit(
        self,
        connection: Connection,
        tenant_id: str | None,
        wanted: str,
        change: Callable[[Any], Mapping[str, Any]],
        now: datetime,
        *,
        if_version: frozenset[int] | None = None,
    ) -> T:
        """Read, decide (``change``: the row → the columns to write) and write, the row held;
        a versioned kind's version goes up by one. With ``if_version``, only if it is still
        at one of them."""
        current = self.row(connection, tenant_id, wanted, for_update=True)
        if if_version is not None and current.version not in if_version:
            raise StaleVersion(
                f"{self.noun} {current.name} is at version {current.version} now, not the one "
                "this change was made to; read it again",
                current_version=current.version,
            )
        values = {**change(current), "updated_at": now}
        guard = [self._is(current)]
        if self.versioned:
            values["version"] = current.version + 1
            guard.append(self.table.c.version == current.version)
        with self._named(values.get("name")):
            connection.execute(update(self.table).where(*guard).values(**values))
        return self.record(self.row(connection, tenant_id, current._mapping[self.found_by[0].name]))

    def delete(self, connection: Connection, tenant_id: str | None, wanted: str) -> Any:
        """Delete the row; the row as it was."""
        current = self.row(connection, tenant_id, wanted, for_update=True)
        connection.execute(delete(self.table).where(self._is(current)))
        return current

    def _is(self, row: Any) -> ColumnElement[bool]:
        """The row itself, by its primary key."""
        return and_(*(column == row._mapping[column.name] for column in self.table.primary_key))
