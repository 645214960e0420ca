"""The schema's floor: the oldest revision whose servers may run on it
(``herder.store.migrations.compatibility``). One row, written by the migrating process."""

from __future__ import annotations

from sqlalchemy import Column, String, Table

from herder.store.schema.base import metadata

schema_compatibility = Table(
    "schema_compatibility",
    metadata,
    Column("oldest_server", String(32), primary_key=True),
)
