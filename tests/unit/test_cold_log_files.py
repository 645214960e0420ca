"""A cold log file: each attempt's blob comes back as it went in, found by the index at the
head; a file that is not one, or a blob that does not match, is ``DamagedLog``."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from herder.store.cold.log_files import IndexedBlob, read_attempt_log, write_log_file
from herder.store.log_blobs import ENCODING, DamagedLog, StoredChunk, pack

AT = datetime(2027, 3, 8, 9, tzinfo=UTC)
LOGS = {
    "att_a": [StoredChunk(0, "stdout", b"one\n", AT), StoredChunk(1, "stderr", b"\xff\n", AT)],
    "att_b": [StoredChunk(0, "system", b"x" * 100_000, AT)],
    "att_c": [],
}


def log_file(logs: dict[str, list[StoredChunk]] = LOGS) -> bytes:
    body, index = io.BytesIO(), []
    for attempt_id, chunks in logs.items():
        blob = pack(chunks)
        index.append(IndexedBlob(attempt_id, body.tell(), len(blob.data), ENCODING,
                                 blob.sha256, blob.content_bytes, blob.chunks))  # fmt: skip
        body.write(blob.data)
    body.seek(0)
    out = io.BytesIO()
    write_log_file(out, index, body)
    return out.getvalue()


def test_each_attempts_log_reads_back_as_it_was_packed() -> None:
    data = log_file()
    for attempt_id, chunks in LOGS.items():
        assert read_attempt_log(data, attempt_id) == chunks
    assert read_attempt_log(data, "att_other") is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: b"not a log file at all",
        lambda data: data[:10],  # ends inside the index
        lambda data: data[:-3],  # the last blob cut short
        lambda data: data[:-3] + b"\x00\x00\x00",
        lambda data: data.replace(b'"att_b"', b'"att_b" ', 1),  # the index's length is off
        lambda data: data[:6] + b"\x00\x00\x00\x02[{" + data[10:],
    ],
)
def test_a_damaged_file_is_named_never_served(damage: Callable[[bytes], bytes]) -> None:
    harmed = damage(log_file())
    with pytest.raises(DamagedLog):
        read_every(harmed)


def read_every(data: bytes) -> list[list[StoredChunk] | None]:
    return [read_attempt_log(data, attempt_id) for attempt_id in LOGS]
