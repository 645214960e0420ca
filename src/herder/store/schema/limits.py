"""What holds submissions and starts back: the shared submission buckets (one row per
rate-limited tenant, ``store/submit_buckets``) and the tenants' limits by key
(``domain.limits``, docs/flow-control.md)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    ForeignKey,
    Index,
    String,
    Table,
    UniqueConstraint,
)

from herder.store.schema.base import (
    ID,
    metadata,
    owned_columns,
    serial_column,
    stamp_columns,
    version_column,
)
from herder.store.types import JsonColumn, UtcDateTime

submit_buckets = Table(
    "submit_buckets",
    metadata,
    Column("tenant_id", ID, ForeignKey("tenants.id"), primary_key=True),
    Column("tokens", Float, nullable=False),  # at refilled_at_us
    Column("granted", Float, nullable=False),  # by the last lease: RETURNING sees no old row
    # microseconds since the epoch, by the leasing processes' clocks: exact differences
    Column("refilled_at_us", BigInteger, nullable=False),
)

# A tenant's named limit (``domain.limits.LimitSpec``), shared by every job, task and schedule
# of the tenant that names it.
limits = Table(
    "limits",
    metadata,
    *owned_columns(64),
    Column("spec", JsonColumn, nullable=False),
    *stamp_columns(),
    version_column(),
    UniqueConstraint("tenant_id", "name"),
)

# Which key of which limit a run counts against (as ``runs.limit_keys``), for counting a
# key's runs set-based; no foreign key to the sliced ``runs``.
run_limit_keys = Table(
    "run_limit_keys",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("limit_id", ID, primary_key=True),
    Column("tenant_id", ID, nullable=False),
    Column("key", String(128), nullable=False),
    Index(None, "limit_id", "key", "run_id"),
)

# When a rate-limited key's runs started (one row a start and key), for counting a key's
# starts within its limit's period; older than the longest period, pruned.
limit_starts = Table(
    "limit_starts",
    metadata,
    serial_column(),
    Column("limit_id", ID, nullable=False),
    Column("key", String(128), nullable=False),
    Column("started_at", UtcDateTime, nullable=False),
    Index(None, "limit_id", "key", "started_at"),
    Index(None, "started_at"),
)

# When each key of a limit last started a run (one row a key), for the keys to take turns by
# the starts they had (``domain.placement.limits.turns``); a start longer ago than a day is
# as none, and pruned.
limit_last_starts = Table(
    "limit_last_starts",
    metadata,
    Column("limit_id", ID, primary_key=True),
    Column("key", String(128), primary_key=True),
    Column("started_at", UtcDateTime, nullable=False),
    Index(None, "started_at"),
)
