"""The directory's tables, apart from any cell's (their own metadata, made by
``create_all``): regions, cells (one of them the default), tenants' homes, the moves under
way (one a tenant) and the cells a tenant lived in before."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    MetaData,
    String,
    Table,
    text,
)

metadata = MetaData()


def _moment(name: str) -> Column[datetime]:
    return Column(name, DateTime(timezone=True), nullable=False)


def _cell_named(name: str, *, primary_key: bool = False, index: bool = False) -> Column[str]:
    """A column naming a cell."""
    return Column(
        name,
        String(63),
        ForeignKey("cells.name"),
        nullable=False,
        primary_key=primary_key,
        index=index,
    )


TENANT_ID = String(64)

regions = Table(
    "regions",
    metadata,
    Column("name", String(63), primary_key=True),
    _moment("created_at"),
)

cells = Table(
    "cells",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("region", String(63), ForeignKey("regions.name"), nullable=False),
    Column("api_url", String(2048), nullable=False),
    Column("is_default", Boolean, nullable=False),
    _moment("created_at"),
    # one default cell at most: two first cells made at once cannot both be it
    Index(
        "cells_one_default",
        "is_default",
        unique=True,
        sqlite_where=text("is_default"),
        postgresql_where=text("is_default"),
    ),
)

tenant_homes = Table(
    "tenant_homes",
    metadata,
    Column("tenant_id", TENANT_ID, primary_key=True),
    _cell_named("cell", index=True),
    _moment("placed_at"),
)

# A tenant moving: one row while its move is under way, so a second move is refused.
tenant_moves = Table(
    "tenant_moves",
    metadata,
    Column("tenant_id", TENANT_ID, primary_key=True),
    _cell_named("from_cell"),
    _cell_named("to_cell"),
    _moment("started_at"),
)

# The cells a tenant lived in before: its runs stay there, read by id through the edge.
previous_homes = Table(
    "previous_homes",
    metadata,
    Column("tenant_id", TENANT_ID, primary_key=True),
    _cell_named("cell", primary_key=True),
    _moment("left_at"),
)
