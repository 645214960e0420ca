"""The directory's tables, apart from any cell's (their own metadata, made by
``create_all``): regions, cells (one of them the default) and tenants' homes."""

from __future__ import annotations

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

regions = Table(
    "regions",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

cells = Table(
    "cells",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("region", String(63), ForeignKey("regions.name"), nullable=False),
    Column("api_url", String(2048), nullable=False),
    Column("is_default", Boolean, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
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
    Column("tenant_id", String(64), primary_key=True),
    Column("cell", String(63), ForeignKey("cells.name"), nullable=False, index=True),
    Column("placed_at", DateTime(timezone=True), nullable=False),
)
