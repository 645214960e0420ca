"""Reading runs back from the cold tier: a tenant's day files, newest day first, filtered
and paged like the hot listing (newest first, below the cursor's id). A day's file is read
whole and decompressed: slower than an index, and only old windows come here."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from datetime import date, datetime
from typing import Any, cast

from herder.domain.history import Slice, slices_between
from herder.domain.models import Run
from herder.store.cold.blobs import BlobStore
from herder.store.cold.manifest import DayFile, Manifest, manifest_key

RunFilter = Callable[[Run], bool]


def manifests_between(blobs: BlobStore, first: datetime, last: datetime) -> Iterator[Manifest]:
    """The manifests of the exported slices from ``first`` to ``last``, newest first."""
    for piece in reversed(slices_between(first, last)):
        if (manifest := read_manifest(blobs, piece)) is not None:
            yield manifest


def read_manifest(blobs: BlobStore, piece: Slice) -> Manifest | None:
    data = blobs.get(manifest_key(piece))
    return None if data is None else Manifest.from_json(data)


def cold_runs(
    blobs: BlobStore,
    tenant_id: str,
    first: datetime,
    last: datetime,
    wanted: RunFilter,
    count: int,
) -> list[Run]:
    """Up to ``count`` of the tenant's runs made from ``first`` to ``last`` that ``wanted``
    keeps, newest first. Days are read newest first and the reading stops once ``count``
    runs are found: an older day holds only older runs."""
    found: list[Run] = []
    for manifest in manifests_between(blobs, first, last):
        for file in _tenant_days(manifest, tenant_id, first.date(), last.date()):
            found += sorted(
                (run for run in _runs_of(blobs, file) if wanted(run)),
                key=lambda run: run.id,
                reverse=True,
            )
            if len(found) >= count:
                return found[:count]
    return found


def cold_record(
    blobs: BlobStore, tenant_id: str, piece: Slice, day: date, run_id: str
) -> dict[str, Any] | None:
    """The run's line (with its attempts and events) in the tenant's file of that day."""
    manifest = read_manifest(blobs, piece)
    if manifest is None:
        return None
    for file in _tenant_days(manifest, tenant_id, day, day):
        data = blobs.get(file.key)
        for line in gzip.decompress(data or b"").splitlines():
            if (record := json.loads(line))["id"] == run_id:
                return cast(dict[str, Any], record)
    return None


def _tenant_days(manifest: Manifest, tenant_id: str, first: date, last: date) -> list[DayFile]:
    mine = [f for f in manifest.files if f.tenant_id == tenant_id and first <= f.day <= last]
    return sorted(mine, key=lambda file: file.day, reverse=True)


def _runs_of(blobs: BlobStore, file: DayFile) -> Iterator[Run]:
    data = blobs.get(file.key)
    if data is None:  # removed past retention after its manifest was read
        return
    for line in gzip.decompress(data).splitlines():
        yield Run.model_validate(json.loads(line))
