"""Exporting the logs of a tenant's runs of a day with them: each attempt's compacted blob,
copied as stored, into one cold log file (``log_files``).

An attempt's log lives in the ``attempt_logs`` slice of its own id's week, at or after its
run's: when the run's slice is exported that slice may still be attached, detached with it,
or detached earlier in the same pass, so all of those are read. Chunks an attempt still has
(the compactor had not reached it, or output committed after it was compacted) are folded
into its blob as the compactor would; a blob that cannot be read is copied as it is (its
read answers 503, as it did hot) and its late chunks go with the slice, logged.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Connection, text

from herder.store.cold.blobs import BlobStore
from herder.store.cold.log_files import IndexedBlob, write_log_file
from herder.store.cold.manifest import LogFile
from herder.store.history.partitions import HISTORY_TABLES, detached_slices
from herder.store.log_blobs import ENCODING, DamagedLog, StoredChunk, pack
from herder.store.log_compaction import merged_chunks

log = logging.getLogger("herder.store")

LOG_BATCH = 500  # attempts whose logs are read at a time
_LOG_TABLES = {table.name: table for table in HISTORY_TABLES if table.key == "attempt_id"}


def export_logs(
    connection: Connection,
    blobs: BlobStore,
    scratch: Path,
    where: tuple[str, date, str],
    attempt_ids: list[str],
) -> LogFile | None:
    """The cold log file of these attempts (in id order) at ``where`` (its key, and the day
    and tenant of their runs); None when none of them has output."""
    key, day, tenant_id = where
    index: list[IndexedBlob] = []
    body_path, file_path = scratch / "logs.body", scratch / "logs.file"
    with body_path.open("wb") as body:
        for attempt_id, blob in _blobs(connection, attempt_ids):
            index.append(IndexedBlob(attempt_id, body.tell(), len(blob["data"]),
                                     blob["encoding"], blob["sha256"], blob["content_bytes"],
                                     blob["chunks"]))  # fmt: skip
            body.write(blob["data"])
    if not index:
        return None
    with file_path.open("wb") as out, body_path.open("rb") as body:
        write_log_file(out, index, body)
    with file_path.open("rb") as written:
        sha256 = hashlib.file_digest(written, "sha256").hexdigest()
    blobs.put(key, file_path)
    return LogFile(key=key, day=day, tenant_id=tenant_id, attempts=len(index),
                   bytes=file_path.stat().st_size, sha256=sha256)  # fmt: skip


def _blobs(connection: Connection, attempt_ids: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each attempt's blob with its leftover chunks folded in, in id order."""
    for start in range(0, len(attempt_ids), LOG_BATCH):
        ids = attempt_ids[start : start + LOG_BATCH]
        stored = {row["attempt_id"]: row for row in _rows(connection, "attempt_logs", ids)}
        leftovers: dict[str, list[StoredChunk]] = {}
        for row in _rows(connection, "log_chunks", ids):
            chunk = StoredChunk(row["seq"], row["stream"], bytes(row["data"]), row["at"])
            leftovers.setdefault(row["attempt_id"], []).append(chunk)
        for attempt_id in ids:
            blob, chunks = stored.get(attempt_id), leftovers.get(attempt_id)
            if chunks:
                blob = _folded(attempt_id, blob, sorted(chunks, key=lambda c: c.seq))
            if blob is not None:
                yield attempt_id, blob


def _folded(attempt_id: str, blob: Any, chunks: list[StoredChunk]) -> Any:
    try:
        packed = pack(merged_chunks(None if blob is None else SimpleNamespace(**blob), chunks))
    except DamagedLog as error:
        log.error("attempt %s goes cold with its damaged log blob; its %d late chunks are "
                  "dropped with its slice: %s", attempt_id, len(chunks), error.detail)  # fmt: skip
        return blob
    return {"data": packed.data, "encoding": ENCODING, "sha256": packed.sha256,
            "content_bytes": packed.content_bytes, "chunks": packed.chunks}  # fmt: skip


def _rows(connection: Connection, table: str, attempt_ids: list[str]) -> list[dict[str, Any]]:
    """The table's rows of these attempts: the attached table's and every detached slice's
    not dropped yet (the attempts are no older than the first of them)."""
    sources = [table] + [
        _LOG_TABLES[table].partition(piece)
        for piece in sorted(detached_slices(connection, _LOG_TABLES[table]))
        if piece.end > _made(attempt_ids[0])
    ]
    found: list[dict[str, Any]] = []
    for source in sources:
        found += [
            dict(row)
            for row in connection.execute(
                text(f'SELECT * FROM "{source}" WHERE attempt_id = ANY(:ids)'
                     " AND attempt_id >= :first"),
                {"ids": attempt_ids, "first": attempt_ids[0]},
            ).mappings()
        ]  # fmt: skip
    return found


def _made(attempt_id: str) -> datetime:
    return _LOG_TABLES["attempt_logs"].moment(attempt_id)
