"""Events, the triggers they start work by, and the inbound webhooks that deliver them
(``domain.events``, ``domain.triggers``, ``domain.hooks``; docs/events.md)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    UniqueConstraint,
)

from herder.store.schema.base import ID, metadata, owned_columns, stamp_columns, version_column
from herder.store.types import JsonColumn, UtcDateTime

# One row per accepted event; ``sender_key`` is unique per tenant while it is kept, so a
# repeat of the sender's id (or a hook's delivery id) starts nothing.
events = Table(
    "events",
    metadata,
    *owned_columns(128),
    Column("source", String(64), nullable=False),
    Column("sender_id", String(128)),
    Column("sender_key", String(200)),
    Column("payload", JsonColumn, nullable=False),
    Column("outcomes", JsonColumn, nullable=False),
    Column("resumed", JsonColumn),  # the waiting workflow tasks it ended
    Column("received_at", UtcDateTime, nullable=False),
    UniqueConstraint("tenant_id", "sender_key"),
    Index(None, "tenant_id", "id"),
    Index(None, "tenant_id", "name", "id"),
    Index(None, "received_at"),
)

triggers = Table(
    "triggers",
    metadata,
    *owned_columns(64),
    Column("event", String(128), nullable=False),
    Column("spec", JsonColumn, nullable=False),
    *stamp_columns(),
    version_column(),
    UniqueConstraint("tenant_id", "name"),
    Index(None, "tenant_id", "event"),
)

# A hook's signing secret is sealed with the server's keyring, bound to tenant and hook.
hooks = Table(
    "hooks",
    metadata,
    *owned_columns(64),
    Column("spec", JsonColumn, nullable=False),
    Column("key_id", String(64), nullable=False),
    Column("nonce", LargeBinary, nullable=False),
    Column("ciphertext", LargeBinary, nullable=False),
    *stamp_columns(),
    version_column(),
    UniqueConstraint("tenant_id", "name"),
)

# Requests to a hook, recorded without their bodies: every accepted one, with the SHA-256 of
# its signed time and body, unique per hook (the same twice is a replay, whatever its
# unsigned headers say); refused ones within their bounds (``domain.hooks``), kept a day.
hook_deliveries = Table(
    "hook_deliveries",
    metadata,
    Column("id", ID, primary_key=True),
    Column("hook_id", ID, nullable=False),
    Column("tenant_id", ID, nullable=False),
    Column("delivery_id", String(128)),
    Column("signed_at", BigInteger),
    Column("status", String(16), nullable=False),
    Column("http_status", Integer, nullable=False),
    Column("reason", String(512)),
    Column("event_id", ID),
    Column("received_at", UtcDateTime, nullable=False),
    Column("signed_digest", String(64)),
    Index(None, "hook_id", "id"),
    Index(None, "hook_id", "delivery_id"),
    Index(None, "hook_id", "signed_digest", unique=True),
    Index(None, "received_at"),
    Index(None, "status", "received_at"),
)

# A workflow's event wait while it waits: which event name it is woken by (with the wait's
# filter), so an event reads only its own waits. Rows of ended waits are pruned.
run_waits = Table(
    "run_waits",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("event_name", String(128), nullable=False),
    Column("filter", String(2048)),
    Index(None, "tenant_id", "event_name"),
)
