"""The runs' checkpoints (``herder.store.checkpoints``, docs/checkpoints.md)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, ForeignKey, Index, Integer, LargeBinary, String, Table

from herder.store.schema.base import ID, metadata
from herder.store.types import UtcDateTime

# A run's last saved checkpoint: one row a run, replaced by each save. No foreign key to runs
# (partitioned on PostgreSQL); the maintenance loop deletes it once its run has ended, or
# ``checkpoint_keep_days`` later (``expires_at``).
checkpoints = Table(
    "checkpoints",
    metadata,
    Column("run_id", ID, primary_key=True),
    Column("tenant_id", ID, ForeignKey("tenants.id"), nullable=False),
    Column("attempt", Integer, nullable=False),  # the attempt that saved it
    Column("sha256", String(64), nullable=False),  # of the stored bytes: its content's address
    Column("stored_bytes", BigInteger, nullable=False),
    Column("saved_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime),  # set once its run has ended and it is kept
    Index(None, "tenant_id", "sha256"),
    Index(None, "expires_at"),
)

# The stored bytes (a gzip'd tar the worker made; never unpacked here), in chunks, addressed by
# content within a tenant: the same content saved by two runs of one tenant is stored once,
# and content of one tenant is never found through another's.
checkpoint_chunks = Table(
    "checkpoint_chunks",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("sha256", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("data", LargeBinary, nullable=False),
)
