"""The secrets' table (``herder.domain.secrets``, ``herder.store.secrets``)."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, LargeBinary, String, Table

from herder.store.schema.base import ID, metadata, stamp_columns

# A tenant's secrets, by name: only ciphertext (AES-256-GCM, ``herder.keyring``), the id of the
# key that sealed it, and its nonce. Never a value in plain text.
secrets = Table(
    "secrets",
    metadata,
    Column("tenant_id", ID, ForeignKey("tenants.id"), primary_key=True),
    Column("name", String(128), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("key_id", String(16), nullable=False),
    Column("nonce", LargeBinary, nullable=False),
    Column("ciphertext", LargeBinary, nullable=False),
    *stamp_columns(),
    Index(None, "key_id"),  # what a re-encryption after a key rotation still has to do
)
