"""The cold tier as the maintenance loop and the run listing see it: a blob store and a hot
window. Slices of runs, attempts and events older than the hot window are detached, exported
(``export``) and only then dropped; a tenant's day files go once past its retention."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection, select

from herder.domain.history import (
    DEFAULT_HOT_DAYS,
    DEFAULT_RETENTION_DAYS,
    MAX_RETENTION_DAYS,
    SLICE_LENGTH,
    Slice,
    slice_named,
    visible_since,
)
from herder.store.cold.blobs import BlobStore, blob_store_at, put_bytes
from herder.store.cold.export import COLD_LOG_TABLES, COLD_TABLES, export_slice
from herder.store.cold.manifest import DayFile, LogFile, Manifest, manifest_key
from herder.store.cold.reads import manifests_between, read_manifest
from herder.store.schema import tenants


class ColdTier:
    def __init__(self, blobs: BlobStore, hot_days: int = DEFAULT_HOT_DAYS) -> None:
        if hot_days < 1:
            raise ValueError(f"HERDER_HOT_DAYS must be 1 or more, not {hot_days}")
        self.blobs = blobs
        self.hot_days = hot_days

    @classmethod
    def at(cls, url: str, hot_days: int = DEFAULT_HOT_DAYS) -> ColdTier:
        return cls(blob_store_at(url), hot_days)

    def hot_since(self, now: datetime) -> datetime:
        """Runs made before this may be in the cold tier only."""
        return now - timedelta(days=self.hot_days)

    def keep_days(self, table: str, longest_retention_days: int) -> int:
        """How long a table's slices stay attached: the hot window for what the cold tier
        holds, logs too (never past every retention), the retention for the rest (fire keys)."""
        if table in COLD_TABLES | COLD_LOG_TABLES:
            return min(self.hot_days, longest_retention_days)
        return longest_retention_days

    def exported(self, piece: Slice) -> bool:
        return read_manifest(self.blobs, piece) is not None

    def export(self, connection: Connection, piece: Slice) -> Manifest:
        return export_slice(connection, self.blobs, piece)

    def remove_expired(self, connection: Connection, now: datetime) -> list[str]:
        """Delete the day files past their tenant's retention: the manifest is rewritten
        without them first (a crash leaves a stray file, never a manifest naming a missing
        one), then they go; a manifest left with no files goes too."""
        retention = dict(connection.execute(select(tenants.c.id, tenants.c.retention_days)).all())
        oldest = now - timedelta(days=MAX_RETENTION_DAYS) - SLICE_LENGTH
        removed: list[str] = []
        for manifest in manifests_between(self.blobs, oldest, self.hot_since(now)):
            files: list[DayFile | LogFile] = [*manifest.files, *manifest.logs]
            expired = {
                file.key
                for file in files
                if file.day + timedelta(days=1)
                <= visible_since(now, retention.get(file.tenant_id, DEFAULT_RETENTION_DAYS)).date()
            }
            if not expired:
                continue
            kept = manifest.without(expired)
            key = manifest_key(slice_named(manifest.slice))
            if kept.files:
                put_bytes(self.blobs, key, kept.to_json())
            else:
                self.blobs.delete(key)
            for gone in sorted(expired):
                self.blobs.delete(gone)
            removed += sorted(expired)
        return removed
