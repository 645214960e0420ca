"""Reading a tenant's own alert objects: one row by id (another tenant's is not found), and
pages of them newest first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Column, Connection, Select, Table, select

from herder.domain.errors import NotFound
from herder.domain.models import Page
from herder.store.pagination import next_cursor, page_query, page_records

T = TypeVar("T")


def owned_row(connection: Connection, table: Table, tenant_id: str, row_id: str, noun: str) -> Any:
    row = connection.execute(
        select(table).where(table.c.tenant_id == tenant_id, table.c.id == row_id)
    ).first()
    if row is None:
        raise NotFound(f"{noun} {row_id} not found")
    return row


def page_of(
    connection: Connection,
    query: Select[Any],
    id_column: Column[str],
    record: Callable[[Any], T],
    *,
    limit: int,
    cursor: str | None,
) -> Page[T]:
    rows = connection.execute(page_query(query, id_column, limit, cursor)).all()
    return Page(
        items=page_records(rows[:limit], record),
        next_cursor=next_cursor([row.id for row in rows], limit),
    )
