"""The alerts' tables (``herder.domain.alerts``, ``herder.store.alerts``)."""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from herder.store.schema.base import ID, metadata, owned_columns, stamp_columns
from herder.store.types import JsonColumn, UtcDateTime

# Alerts (``herder.domain.alerts``): a tenant's channels, its rules, the incidents they open
# and the deliveries those make. No foreign keys between them: deleting a rule or a channel
# removes what belongs to it in the same transaction (``store.alerts``).
alert_channels = Table(
    "alert_channels",
    metadata,
    *owned_columns(128),
    Column("kind", String(16), nullable=False),
    Column("url", Text, nullable=False),
    # the HMAC key, sealed (``herder.keyring``) like a tenant's secrets
    Column("key_id", String(16)),
    Column("nonce", LargeBinary),
    Column("ciphertext", LargeBinary),
    # a secret made before 0016, until a server with a keyring starts and seals it
    Column("plain_secret", String(128)),
    Column("enabled", Boolean, nullable=False),
    *stamp_columns(),
    # a job notice's own channel (its id), or ``owner`` for the 24-hour notices (0038)
    Column("managed_by", String(40)),
    UniqueConstraint("tenant_id", "name"),
    Index(None, "tenant_id", "id"),
    Index(None, "key_id"),  # what a re-encryption after a key rotation still has to do
)

alert_rules = Table(
    "alert_rules",
    metadata,
    *owned_columns(128),
    Column("kind", String(32), nullable=False),
    Column("params", JsonColumn, nullable=False),
    Column("channel_ids", JsonColumn, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("notify_recovery", Boolean, nullable=False),
    Column("evaluated_at", UtcDateTime),  # the watermark of event-driven kinds
    *stamp_columns(),
    Column("managed_by", String(40)),  # the job notice (its id) it is part of (0038)
    UniqueConstraint("tenant_id", "name"),
    Index(None, "tenant_id", "id"),
)

alert_incidents = Table(
    "alert_incidents",
    metadata,
    *owned_columns(),
    Column("rule_id", ID, nullable=False),
    Column("key", String(128), nullable=False),
    Column("state", String(16), nullable=False),
    # "<rule id> <key>" while open, NULL once resolved: unique, so two evaluators racing
    # open one incident (a portable partial unique index)
    Column("open_key", String(200), unique=True),
    Column("summary", Text, nullable=False),
    Column("details", JsonColumn, nullable=False),
    Column("opened_at", UtcDateTime, nullable=False),
    Column("last_seen_at", UtcDateTime, nullable=False),
    Column("resolved_at", UtcDateTime),
    Column("resolution", Text),  # what resolved it: a recovery, or its rule disabled or deleted
    Index(None, "tenant_id", "id"),
    Index(None, "rule_id", "state"),
)

alert_deliveries = Table(
    "alert_deliveries",
    metadata,
    *owned_columns(),
    Column("channel_id", ID, nullable=False),
    Column("incident_id", ID),
    Column("event", String(16), nullable=False),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", UtcDateTime),  # NULL once delivered or failed
    Column("last_status", Integer),
    Column("last_error", Text),
    Column("history", JsonColumn, nullable=False),  # every attempt: at, status, error
    Column("payload", JsonColumn, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("delivered_at", UtcDateTime),
    Index(None, "tenant_id", "id"),
    Index(None, "channel_id", "id"),
    Index(None, "next_attempt_at"),  # the sender's "what is due"
)

# A job's notices (``herder.domain.alerts.notices``): a person's subscription, made of a
# channel and rules marked ``managed_by`` it; and each run stopped at the 24-hour limit, once
# its owner was told (or found no one to tell), so a pass never tells it twice.
job_notices = Table(
    "job_notices",
    metadata,
    *owned_columns(),
    Column("job_id", ID, nullable=False),
    Column("subscriber", String(128), nullable=False),  # an actor: user:usr_… or user:key_…
    Column("events", JsonColumn, nullable=False),
    Column("channel_id", ID, nullable=False),
    *stamp_columns(),
    UniqueConstraint("job_id", "subscriber"),
    Index(None, "tenant_id", "job_id"),
)

limit_notices = Table(
    "limit_notices",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("tenant_id", ID, ForeignKey("tenants.id"), nullable=False),
    Column("told", String(16), nullable=False),  # subscribers, owner, or nobody
    Column("at", UtcDateTime, nullable=False),
)
