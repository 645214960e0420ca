"""A cold log file: the compacted logs (``log_blobs``) of a tenant's runs of a day, one
after another as they were stored (already compressed: not compressed again), behind an
index of attempt id → where its blob lies and how to check it.

    b"HLOG1\\n"  u32 index length (big-endian)  index (JSON)  blob  blob  …

An offset is counted from the first blob, so one attempt's log is a byte range of the file
once the head is read.
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass
from typing import IO

from herder.store.log_blobs import DamagedLog, StoredChunk, unpack

MAGIC = b"HLOG1\n"
INDEX_LENGTH = struct.Struct(">I")


@dataclass(frozen=True)
class IndexedBlob:
    attempt_id: str
    offset: int
    length: int
    encoding: str
    sha256: str  # of the framed content, as in ``attempt_logs``
    content_bytes: int
    chunks: int


def write_log_file(out: IO[bytes], index: list[IndexedBlob], body: IO[bytes]) -> None:
    """The head (magic, index), then ``body``: the blobs at the index's offsets."""
    encoded = json.dumps([asdict(entry) for entry in index], separators=(",", ":")).encode()
    out.write(MAGIC + INDEX_LENGTH.pack(len(encoded)) + encoded)
    while block := body.read(1024 * 1024):
        out.write(block)


def read_attempt_log(data: bytes, attempt_id: str) -> list[StoredChunk] | None:
    """The chunks of the attempt's blob in a log file; None when it has none there
    (``DamagedLog`` when the file or the blob cannot be read)."""
    head = len(MAGIC) + INDEX_LENGTH.size
    if not data.startswith(MAGIC) or len(data) < head:
        raise DamagedLog("the cold log file does not start as one")
    (length,) = INDEX_LENGTH.unpack_from(data, len(MAGIC))
    try:
        index = [IndexedBlob(**entry) for entry in json.loads(data[head : head + length])]
    except (ValueError, TypeError) as error:
        raise DamagedLog(f"the cold log file's index cannot be read ({error})") from error
    body = head + length
    for entry in index:
        if entry.attempt_id == attempt_id:
            blob = data[body + entry.offset : body + entry.offset + entry.length]
            return unpack(blob, encoding=entry.encoding, sha256=entry.sha256,
                          content_bytes=entry.content_bytes)  # fmt: skip
    return None
