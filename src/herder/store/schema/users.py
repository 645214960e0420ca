"""People signed in through OpenID Connect and their sessions (``herder.store.users``,
docs/tenants.md "Single sign-on"). A session's secret is stored only as its sha256."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, String, Table, UniqueConstraint

from herder.store.schema.base import ID, metadata
from herder.store.types import UtcDateTime

# A person as their provider names them: (issuer, subject) is who they are; the tenant is the
# one their claims or groups mapped them to at their last sign-in.
users = Table(
    "users",
    metadata,
    Column("id", ID, primary_key=True),
    Column("tenant_id", ID, ForeignKey("tenants.id"), nullable=False, index=True),
    Column("issuer", String(255), nullable=False),
    Column("subject", String(255), nullable=False),
    Column("name", String(255), nullable=False),
    Column("email", String(255), nullable=False, server_default=""),
    Column("created_at", UtcDateTime, nullable=False),
    Column("last_seen_at", UtcDateTime, nullable=False),
    UniqueConstraint("issuer", "subject"),
)

# A signed-in person's session: the dashboard's cookie or the CLI's bearer (``hse_…``), with
# the role it was granted at sign-in; short-lived and revocable.
sessions = Table(
    "sessions",
    metadata,
    Column("id", ID, primary_key=True),
    Column("user_id", ID, ForeignKey("users.id"), nullable=False, index=True),
    Column("tenant_id", ID, ForeignKey("tenants.id"), nullable=False),
    Column("role", String(16), nullable=False),
    Column("kind", String(16), nullable=False),  # dashboard | cli
    Column("secret_hash", String(64), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("revoked_at", UtcDateTime),
    Index(None, "tenant_id", "id"),  # a tenant's sessions, newest first
)
