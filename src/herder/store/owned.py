"""One row a tenant owns, or ``NotFound``: another tenant's row is not found either, so a
caller cannot tell it from one that does not exist."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, ColumnElement, Connection, Table, select

from herder.domain.errors import NotFound

MAX_SHOWN_CHARS = 128  # of a name in the message: a caller's long text is not echoed whole


def owned_row(
    connection: Connection,
    table: Table,
    tenant_id: str,
    row_id: str,
    noun: str,
    *,
    key: Column[str] | None = None,
    columns: Sequence[ColumnElement[Any]] = (),
    where: Sequence[ColumnElement[bool]] = (),
    for_update: bool = False,
) -> Any:
    """The row of ``table`` whose ``key`` (default: its id) is ``row_id``, with ``columns``
    (default: all), if it also meets ``where``; ``for_update`` holds it until commit."""
    key_column = table.c.id if key is None else key
    query = select(*columns) if columns else select(table)
    query = query.where(table.c.tenant_id == tenant_id, key_column == row_id, *where)
    row = connection.execute(query.with_for_update() if for_update else query).first()
    if row is None:
        raise NotFound(f"{noun} {row_id[:MAX_SHOWN_CHARS]} not found")
    return row
