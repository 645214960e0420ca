"""The compacted log's format: what goes in comes out, and damage is named, never served."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from herder.store.log_blobs import Blob, DamagedLog, StoredChunk, pack, unpack

AT = datetime(2026, 11, 24, 3, 0, 0, 123456, tzinfo=UTC)
CHUNKS = [
    StoredChunk(0, "stdout", b"hello\n", AT),
    StoredChunk(1, "stderr", b"\xff not utf-8 \x00\n", AT + timedelta(microseconds=1)),
    StoredChunk(2, "system", b"", AT + timedelta(days=400)),
    StoredChunk(7, "stdout", b"x" * 300_000, AT + timedelta(seconds=9)),
    StoredChunk(2**40, "stdout", b"a seq SQLite can hold\n", AT),
]


def read(blob_data: bytes, sha256: str, content_bytes: int) -> list[StoredChunk]:
    return unpack(blob_data, encoding="zlib", sha256=sha256, content_bytes=content_bytes)


def test_what_is_packed_unpacks_the_same() -> None:
    blob = pack(CHUNKS)
    assert read(blob.data, blob.sha256, blob.content_bytes) == CHUNKS
    assert blob.chunks == 5
    assert len(blob.data) < blob.content_bytes / 100


def test_no_chunks_is_an_empty_blob() -> None:
    blob = pack([])
    assert read(blob.data, blob.sha256, blob.content_bytes) == []


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda b: (b.data[:-10], b.sha256, b.content_bytes), "another size"),
        (lambda b: (b"garbage" + b.data, b.sha256, b.content_bytes), "does not decompress"),
        (lambda b: (b.data, "0" * 64, b.content_bytes), "does not match its sha256"),
        (lambda b: (b.data, b.sha256, b.content_bytes - 1), "another size"),
        (lambda b: (zlib.compress(b"\x00" * 40), b.sha256, 40), "does not match its sha256"),
    ],
    ids=["cut short", "prefixed", "other sha256", "other size", "other content"],
)
def test_damage_is_named(change: Callable[[Blob], tuple[bytes, str, int]], why: str) -> None:
    data, sha256, size = change(pack(CHUNKS))
    with pytest.raises(DamagedLog, match=why):
        read(data, sha256, size)


def test_an_encoding_this_server_cannot_read_is_damage() -> None:
    blob = pack(CHUNKS)
    with pytest.raises(DamagedLog, match="'zstd'"):
        unpack(blob.data, encoding="zstd", sha256=blob.sha256, content_bytes=blob.content_bytes)
