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

# Each stored content (a gzip'd tar the worker made; never unpacked here), addressed within a
# tenant: the same content saved by two runs of one tenant is stored once, and content of one
# tenant is never found through another's. Its bytes are in ``checkpoint_chunks`` or, when
# the server has a cold store (``HERDER_COLD_STORE``), there under
# ``checkpoints/<tenant>/<sha256>``. A content there that no checkpoint names any more is
# marked ``unreferenced_since`` and deleted by the sweeper after a grace.
checkpoint_contents = Table(
    "checkpoint_contents",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("sha256", String(64), primary_key=True),
    Column("stored_bytes", BigInteger, nullable=False),
    Column("location", String(16), nullable=False),  # domain.checkpoints.ContentLocation
    Column("unreferenced_since", UtcDateTime),
    Index(None, "unreferenced_since"),
)

# The bytes of the contents kept in the database, in chunks.
checkpoint_chunks = Table(
    "checkpoint_chunks",
    metadata,
    Column("tenant_id", ID, primary_key=True),
    Column("sha256", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("data", LargeBinary, nullable=False),
)
