"""The version of what placement reads that changes only by hand — tenants (weights, quotas,
default pools), pools, their shares, budgets — one row, moved on by triggers on those tables
in the transaction that changes them (migration 0032), so a dispatcher keeps what it read
until the version moves (``store.runs.kept_settings``)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, SmallInteger, Table

from herder.store.schema.base import metadata

placement_settings = Table(
    "placement_settings",
    metadata,
    Column("id", SmallInteger, primary_key=True, autoincrement=False),  # the one row: 1
    Column("version", BigInteger, nullable=False),
)
