"""Exporting a detached slice of runs, attempts and events: for each day and tenant a
gzip'd JSON Lines file (a run a line, its attempts and events inside it), then the manifest.

Streamed a day at a time in (tenant, id) order, so memory holds one batch of runs however
big the slice. gzip is written without a time stamp, so an export done again (after a crash
before its manifest) writes the same bytes over the same keys.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Column, Connection, Table, text

from herder.clock import epoch_ms
from herder.domain.history import Slice
from herder.domain.ids import id_bound
from herder.store.cold.blobs import BlobStore, put_bytes
from herder.store.cold.log_export import export_logs
from herder.store.cold.manifest import (
    DayFile,
    LogFile,
    Manifest,
    day_file_key,
    log_file_key,
    manifest_key,
)
from herder.store.schema import attempts, run_events, runs

COLD_TABLES = frozenset({"runs", "attempts", "run_events"})  # what the day files hold
# Sliced by attempt id: exported with the runs of their attempts (``log_export``), dropped
# once no slice up to theirs waits for its export.
COLD_LOG_TABLES = frozenset({"attempt_logs", "log_chunks"})
EXPORT_BATCH = 1000  # runs read (with their attempts and events) at a time
Row = dict[str, Any]
Batch = list[tuple[Row, list[Row], list[Row]]]  # runs, each with its attempts and events


def export_slice(connection: Connection, blobs: BlobStore, piece: Slice) -> Manifest:
    """Write the slice's day files and log files, then its manifest; the slice's partitions
    are detached plain tables (``runs_p20261123`` …)."""
    files: list[DayFile] = []
    logs: list[LogFile] = []
    with tempfile.TemporaryDirectory(prefix="herder-cold-") as scratch:
        for day in _days(piece):
            for tenant_id, batches in _tenants_of_day(connection, piece, day):
                files.append(_write_day_file(blobs, Path(scratch), piece, day, tenant_id, batches))
                where = (log_file_key(piece, day, tenant_id), day, tenant_id)
                its_attempts = _attempts_of_day(connection, piece, day, tenant_id)
                if its_attempts and (
                    written := export_logs(connection, blobs, Path(scratch), where, its_attempts)
                ):
                    logs.append(written)
        first, end = piece.bounds("run")
        manifest = Manifest(piece.suffix, first, end, tuple(files), tuple(logs))
        put_bytes(blobs, manifest_key(piece), manifest.to_json())
    return manifest


def _line(run: dict[str, Any], its_attempts: list[Any], its_events: list[Any]) -> bytes:
    record = run | {"attempts": its_attempts, "events": its_events}
    return json.dumps(record, default=_plain, separators=(",", ":")).encode() + b"\n"


@dataclass
class _Counts:
    runs: int = 0
    attempts: int = 0
    events: int = 0
    digest: Any = field(default_factory=hashlib.sha256)


def _write_day_file(
    blobs: BlobStore,
    scratch: Path,
    piece: Slice,
    day: date,
    tenant_id: str,
    batches: Iterable[Batch],
) -> DayFile:
    key, counts = day_file_key(piece, day, tenant_id), _Counts()
    path = scratch / "day.jsonl.gz"
    with (
        path.open("wb") as raw,
        gzip.GzipFile(fileobj=_Hashing(raw, counts), mode="wb", mtime=0) as out,
    ):
        for batch in batches:
            for run, its_attempts, its_events in batch:
                out.write(_line(run, its_attempts, its_events))
                counts.runs += 1
                counts.attempts += len(its_attempts)
                counts.events += len(its_events)
    blobs.put(key, path)
    return DayFile(
        key=key, day=day, tenant_id=tenant_id, runs=counts.runs, attempts=counts.attempts,
        events=counts.events, bytes=path.stat().st_size, sha256=counts.digest.hexdigest(),
    )  # fmt: skip


class _Hashing:
    """A file that hashes what is written to it (the compressed bytes, as stored)."""

    def __init__(self, raw: IO[bytes], counts: _Counts) -> None:
        self._raw, self._counts = raw, counts

    def write(self, data: bytes) -> int:
        self._counts.digest.update(data)
        return self._raw.write(data)

    def flush(self) -> None:
        self._raw.flush()


def _attempts_of_day(connection: Connection, piece: Slice, day: date, tenant_id: str) -> list[str]:
    """The ids of the attempts of the tenant's runs of the day, in order."""
    low, high = _day_bounds(piece, day)
    return list(
        connection.execute(
            text(f'SELECT a.id FROM "attempts_{piece.suffix}" a'
                 f' JOIN "runs_{piece.suffix}" r ON r.id = a.run_id'
                 " WHERE r.tenant_id = :tenant AND r.id >= :low AND r.id < :high ORDER BY a.id"),
            {"tenant": tenant_id, "low": low, "high": high},
        ).scalars()
    )  # fmt: skip


def _day_bounds(piece: Slice, day: date) -> tuple[str, str]:
    start = datetime(day.year, day.month, day.day, tzinfo=piece.start.tzinfo)
    low, high = (id_bound("run", epoch_ms(moment)) for moment in (start, start + timedelta(1)))
    return low, high


def _tenants_of_day(
    connection: Connection, piece: Slice, day: date
) -> Iterator[tuple[str, Iterator[Batch]]]:
    """Each tenant with runs that day, and its runs in batches (with attempts and events)."""
    low, high = _day_bounds(piece, day)
    tenant_ids = connection.execute(
        text(f'SELECT DISTINCT tenant_id FROM "runs_{piece.suffix}"'
             " WHERE id >= :low AND id < :high ORDER BY tenant_id"),
        {"low": low, "high": high},
    ).scalars().all()  # fmt: skip
    for tenant_id in tenant_ids:
        yield tenant_id, _batches(connection, piece, tenant_id, low, high)


def _batches(
    connection: Connection, piece: Slice, tenant_id: str, low: str, high: str
) -> Iterator[Batch]:
    after = low  # a bound, shorter than any id: every id of the day sorts above it
    while True:
        found = _read(
            connection, runs, piece,
            "tenant_id = :tenant AND id > :after AND id < :high ORDER BY id LIMIT :batch",
            {"tenant": tenant_id, "after": after, "high": high, "batch": EXPORT_BATCH},
        )  # fmt: skip
        if not found:
            return
        ids = [run["id"] for run in found]
        its_attempts = _grouped(
            _read(connection, attempts, piece, _OF_RUNS + " ORDER BY number, rank", {"ids": ids})
        )
        its_events = _grouped(
            _read(connection, run_events, piece, _OF_RUNS + " ORDER BY id", {"ids": ids})
        )
        yield [
            (run, its_attempts.get(run["id"], []), its_events.get(run["id"], [])) for run in found
        ]
        after = ids[-1]


_OF_RUNS = "run_id = ANY(:ids)"


def _read(
    connection: Connection, table: Table, piece: Slice, where: str, values: dict[str, Any]
) -> list[dict[str, Any]]:
    """Rows of a detached partition, typed as the table's columns."""
    columns: list[Column[Any]] = list(table.columns)
    names = ", ".join(f'"{column.name}"' for column in columns)
    query = text(f'SELECT {names} FROM "{table.name}_{piece.suffix}" WHERE {where}').columns(
        *columns
    )
    return [dict(row) for row in connection.execute(query, values).mappings()]


def _grouped(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["run_id"], []).append(row)
    return grouped


def _days(piece: Slice) -> list[date]:
    return [(piece.start + timedelta(days=offset)).date() for offset in range(7)]


def _plain(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} has no JSON form")
