"""The few statements whose spelling differs between SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

from herder.store.database import Database


def insert_ignoring_duplicates(database: Database, table: Table, **values: Any) -> Insert:
    """``INSERT … ON CONFLICT DO NOTHING``: the unique key decides, whoever inserts first."""
    dialect_insert = postgresql.insert if database.is_postgres else sqlite.insert
    return dialect_insert(table).values(**values).on_conflict_do_nothing()
