"""Compacted output (``herder.store.log_compaction``): once an attempt has ended, its log
chunks become one compressed blob, one row per attempt.

The blob belongs to its attempt alone — the sha256 names its content and checks it on every
read, but equal logs are never shared between attempts, so dropping a run's history (or a
tenant's) drops exactly its own blobs. Delete by ``attempt_id`` before the attempt itself.
"""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Integer, LargeBinary, String, Table

from herder.store.schema.base import ID, metadata
from herder.store.types import UtcDateTime

attempt_logs = Table(
    "attempt_logs",
    metadata,
    Column("attempt_id", ID, ForeignKey("attempts.id"), primary_key=True),
    Column("run_id", ID, nullable=False),  # whose it is, without a join (retention, audits)
    Column("sha256", String(64), nullable=False),  # of the framed content, uncompressed
    Column("encoding", String(16), nullable=False),  # how ``data`` is compressed
    Column("content_bytes", Integer, nullable=False),  # uncompressed, frame headers included
    Column("stored_bytes", Integer, nullable=False),  # len(data)
    Column("chunks", Integer, nullable=False),
    Column("compacted_at", UtcDateTime, nullable=False),
    Column("data", LargeBinary, nullable=False),
)
