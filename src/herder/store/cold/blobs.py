"""Where the cold tier's files live: a blob store, a directory by default. Runs' checkpoints
live there too when ``HERDER_COLD_STORE`` is set (``herder.store.checkpoints``).

Every write is atomic (a temporary file renamed into place), so a reader never sees half a
file and a crash leaves at worst a stray temporary one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Protocol
from urllib.parse import unquote, urlsplit

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
READ_BYTES = 1024 * 1024  # a streamed read's piece


class BlobStore(Protocol):
    def put(self, key: str, source: Path) -> None:
        """Store the file at ``source`` under ``key``, replacing what was there."""

    def put_stream(self, key: str, source: IO[bytes]) -> None:
        """Store what ``source`` holds from where it stands to its end under ``key``."""

    def get(self, key: str) -> bytes | None:
        """The bytes under ``key``; None when there are none."""

    def stream(self, key: str) -> Iterator[bytes] | None:
        """The bytes under ``key`` a piece at a time, never all held at once; None when
        there are none."""

    def delete(self, key: str) -> None:
        """Forget ``key``; nothing happens when it is not there."""


class DirectoryBlobStore:
    """Keys are relative paths under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def put(self, key: str, source: Path) -> None:
        with source.open("rb") as read:
            self.put_stream(key, read)

    def put_stream(self, key: str, source: IO[bytes]) -> None:
        target = self._path(key)
        for directory in reversed([target.parent, *target.parent.parents]):
            if directory.is_relative_to(self.root):
                directory.mkdir(exist_ok=True, mode=DIRECTORY_MODE)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(handle, "wb") as written:
                shutil.copyfileobj(source, written)
                written.flush()
                os.fsync(written.fileno())
            os.chmod(temporary, FILE_MODE)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def stream(self, key: str) -> Iterator[bytes] | None:
        try:
            opened = self._path(key).open("rb")
        except FileNotFoundError:
            return None
        return _pieces(opened)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root):
            raise ValueError(f"blob key {key!r} leaves the store")
        return path


def _pieces(opened: IO[bytes]) -> Iterator[bytes]:
    with opened:
        while piece := opened.read(READ_BYTES):
            yield piece


def put_bytes(blobs: BlobStore, key: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="herder-blob-") as scratch:
        source = Path(scratch) / "blob"
        source.write_bytes(data)
        blobs.put(key, source)


def blob_store_at(url: str) -> BlobStore:
    """The store a ``HERDER_COLD_STORE`` names: ``file:///path`` (or a plain path), or
    ``s3://bucket/prefix``."""
    parts = urlsplit(url)
    if parts.scheme in ("", "file"):
        return DirectoryBlobStore(Path(unquote(parts.path)))
    if parts.scheme == "s3" and parts.netloc:
        from herder.store.cold.s3 import S3BlobStore

        return S3BlobStore(parts.netloc, unquote(parts.path))
    raise ValueError(f"HERDER_COLD_STORE {url!r}: file:///path or s3://bucket/prefix")
