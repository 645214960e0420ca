"""Artifacts downloaded once per worker, kept by sha256, and checked against it every time one
is handed to an attempt: as it arrives, and again when it is taken from the cache. Bytes that
are not what their sha256 names are never run: the attempt fails saying so, and a cached copy
that changed on disk is removed, so a later attempt fetches it again."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from herder.domain.artifacts import is_sha256
from herder.domain.errors import Invalid

# Write the artifact named by this sha256 to this path (a new file), as the server sends it.
Download = Callable[[str, Path], Awaitable[None]]
READ_BYTES = 1024 * 1024  # hashed a piece at a time
PARTIAL = ".partial"  # a download on its way; a worker that died in one leaves it


class ArtifactCache:
    def __init__(self, directory: Path, download: Download) -> None:
        self._directory = directory
        self._download = download
        self._locks: dict[str, asyncio.Lock] = {}
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        for partial in directory.glob(f"*{PARTIAL}"):
            partial.unlink(missing_ok=True)

    async def path(self, sha256: str) -> Path:
        """The cached copy, its bytes checked to be what ``sha256`` names; fetched first when
        there is none. ``Invalid`` when they are not: the attempt is not run."""
        if not is_sha256(sha256):
            raise Invalid(f"artifact {sha256[:80]!r} is not named by a sha256")
        target = self._directory / sha256
        async with self._locks.setdefault(sha256, asyncio.Lock()):
            if not target.exists():
                await self._fetch(sha256, target)
                return target
        digest, inode = await asyncio.to_thread(_digest_of, target)
        if digest != sha256:
            async with self._locks[sha256]:
                if _inode(target) == inode:  # not already replaced by a fresh download
                    target.unlink()
            raise Invalid(
                f"the cached copy of artifact {sha256} is not what its sha256 names (changed "
                "on this worker's disk): not run, and removed, so the next attempt fetches it"
            )
        return target

    async def _fetch(self, sha256: str, target: Path) -> None:
        partial = target.with_name(f"{sha256}.{os.getpid()}{PARTIAL}")
        try:
            await self._download(sha256, partial)
            digest, _ = await asyncio.to_thread(_digest_of, partial)
            if digest != sha256:
                raise Invalid(f"artifact {sha256} arrived corrupted (sha256 mismatch): not run")
            partial.chmod(0o400)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)


def _digest_of(path: Path) -> tuple[str, int]:
    """The sha256 of the file at ``path`` (never through a symbolic link), and its inode."""
    digest = hashlib.sha256()
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as source:
        inode = os.fstat(source.fileno()).st_ino
        while piece := source.read(READ_BYTES):
            digest.update(piece)
    return digest.hexdigest(), inode


def _inode(path: Path) -> int | None:
    try:
        return path.stat(follow_symlinks=False).st_ino
    except FileNotFoundError:
        return None
