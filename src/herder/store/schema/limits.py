"""The shared submission buckets: one row per rate-limited tenant (``store/submit_buckets``)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, ForeignKey, Table

from herder.store.schema.base import ID, metadata

submit_buckets = Table(
    "submit_buckets",
    metadata,
    Column("tenant_id", ID, ForeignKey("tenants.id"), primary_key=True),
    Column("tokens", Float, nullable=False),  # at refilled_at_us
    Column("granted", Float, nullable=False),  # by the last lease: RETURNING sees no old row
    # microseconds since the epoch, by the leasing processes' clocks: exact differences
    Column("refilled_at_us", BigInteger, nullable=False),
)
