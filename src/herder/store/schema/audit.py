"""The audit log (``herder.store.audit``): one row per change made through the API."""

from __future__ import annotations

from sqlalchemy import Column, Index, Integer, String, Table

from herder.store.schema.base import ID, metadata, owned_columns
from herder.store.types import JsonColumn, UtcDateTime

# Who changed what, when, and how it ended. ``fields`` holds the names of the body's fields,
# never their values. The ids sort by time: a tenant's newest first is its (tenant_id, id)
# index read backwards; ``created_at`` is for ranges and retention.
audit_log = Table(
    "audit_log",
    metadata,
    *owned_columns(),
    Column("key_id", ID, nullable=False),
    Column("key_name", String(128), nullable=False),
    Column("role", String(16), nullable=False),
    Column("action", String(128), nullable=False),
    Column("method", String(8), nullable=False),
    Column("route", String(255), nullable=False),
    Column("object_type", String(64), nullable=False),
    Column("object_id", String(255)),
    Column("fields", JsonColumn, nullable=False),
    Column("status", Integer, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    # the caller's actor (domain.actors: a signed-in person's ``user:usr_…``), named as the
    # log is read; NULL before 0037, when it was ``user:<key_id>``
    Column("actor", String(128)),
    Index(None, "tenant_id", "id"),
    Index(None, "tenant_id", "object_id", "id"),
)
