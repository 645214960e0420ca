"""Time budgets and what runs used against them (``domain.budgets``, docs/budgets.md)."""

from __future__ import annotations

from sqlalchemy import Column, Float, ForeignKey, Integer, String, Table

from herder.store.schema.base import ID, metadata
from herder.store.types import JsonColumn, UtcDateTime

# A tenant's budgets and the time zone its periods begin in, set by a system admin.
tenant_budgets = Table(
    "tenant_budgets",
    metadata,
    Column("tenant_id", ID, ForeignKey("tenants.id"), primary_key=True),
    Column("time_zone", String(64), nullable=False),
    Column("budgets", JsonColumn, nullable=False),  # a list of domain.budgets.Budget
    Column("updated_at", UtcDateTime, nullable=False),
)

# What ended attempts used, added up per tenant, local day (in the tenant's time zone when
# charged, ISO yyyy-mm-dd), pool ('' for none), job and shard (store.usage): a period's use
# is a range of days.
usage_charges = Table(
    "usage_charges",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("day", String(10), primary_key=True),
    Column("pool", String(64), primary_key=True),
    Column("job_id", ID, primary_key=True),
    Column("shard", Integer, primary_key=True),  # of the ending attempt's worker
    Column("cpu_seconds", Float, nullable=False),
    Column("gpu_seconds", Float, nullable=False),
    Column("attempts", Integer, nullable=False),
)
