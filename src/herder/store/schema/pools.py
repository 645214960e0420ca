"""Resource pools and the tenants' shares of them (``domain.pools``, docs/pools.md)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, ForeignKey, Index, Integer, String, Table, Text

from herder.store.schema.base import ID, metadata, stamp_columns
from herder.store.types import JsonColumn

# A named group of workers (those whose labels match ``selector``), made by a system admin.
# Runs and jobs name a pool by ``name``; a deleted pool's waiting runs wait with a reason.
pools = Table(
    "pools",
    metadata,
    Column("id", ID, primary_key=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("description", Text, nullable=False, server_default=""),
    Column("selector", JsonColumn, nullable=False),  # labels → value, every one required
    Column("autoscaling", JsonColumn),  # domain.autoscaling.AutoscalingSpec; None: fixed
    *stamp_columns(),
)

# A tenant that may use a pool, and its nominal share of it (zero: it may borrow only).
pool_shares = Table(
    "pool_shares",
    metadata,
    Column("pool_id", ID, ForeignKey("pools.id", ondelete="CASCADE"), primary_key=True),
    Column("tenant_id", ID, ForeignKey("tenants.id"), primary_key=True),
    Column("cpu_milli", BigInteger, nullable=False),
    Column("memory_mb", BigInteger, nullable=False),
    Column("gpus", Integer, nullable=False),
    Index(None, "tenant_id"),
)
