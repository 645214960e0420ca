"""Artifacts downloaded once per worker, kept by sha256 and verified before use."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from herder.domain.errors import Invalid

Download = Callable[[str], Awaitable[bytes]]


class ArtifactCache:
    def __init__(self, directory: Path, download: Download) -> None:
        self._directory = directory
        self._download = download
        self._locks: dict[str, asyncio.Lock] = {}
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    async def path(self, sha256: str) -> Path:
        target = self._directory / sha256
        if target.exists():
            return target
        async with self._locks.setdefault(sha256, asyncio.Lock()):
            if not target.exists():
                data = await self._download(sha256)
                if hashlib.sha256(data).hexdigest() != sha256:
                    raise Invalid(f"artifact {sha256} arrived corrupted (sha256 mismatch)")
                await asyncio.to_thread(_write_atomically, target, data)
        return target


def _write_atomically(target: Path, data: bytes) -> None:
    partial = target.with_suffix(f".{os.getpid()}.partial")
    partial.write_bytes(data)
    partial.chmod(0o400)
    partial.replace(target)
