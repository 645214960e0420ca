"""A worker's artifact cache hands an attempt only bytes that are what their sha256 names: as
they arrive, and each time a cached copy is taken again. Anything else is refused, never run;
a cached copy that changed on disk is removed and fetched again by the next attempt."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest

from herder.domain.errors import Invalid
from herder.worker.cache import ArtifactCache

PROGRAM = b"print('the real program')\n"
SHA256 = hashlib.sha256(PROGRAM).hexdigest()


class Server:
    """Sends ``sent`` for every download, counting them."""

    def __init__(self, sent: bytes = PROGRAM) -> None:
        self.sent = sent
        self.downloads = 0

    async def download(self, sha256: str, into: Path) -> None:
        self.downloads += 1
        into.write_bytes(self.sent)


def path_of(cache: ArtifactCache, sha256: str = SHA256) -> Path:
    return asyncio.run(cache.path(sha256))


def test_a_download_is_checked_then_kept_read_only_and_reused(tmp_path: Path) -> None:
    server = Server()
    cache = ArtifactCache(tmp_path / "cache", server.download)
    first = path_of(cache)
    assert first.read_bytes() == PROGRAM
    assert first.stat().st_mode & 0o777 == 0o400
    assert path_of(cache) == first
    assert server.downloads == 1


def test_a_download_that_is_not_its_sha256_is_refused_and_not_kept(tmp_path: Path) -> None:
    server = Server(b"print('something else')\n")
    cache = ArtifactCache(tmp_path / "cache", server.download)
    with pytest.raises(Invalid, match="arrived corrupted"):
        path_of(cache)
    assert list((tmp_path / "cache").iterdir()) == []
    server.sent = PROGRAM  # the next attempt fetches it again
    assert path_of(cache).read_bytes() == PROGRAM
    assert server.downloads == 2


def test_a_cached_copy_changed_on_disk_is_refused_removed_and_fetched_again(
    tmp_path: Path,
) -> None:
    server = Server()
    cache = ArtifactCache(tmp_path / "cache", server.download)
    cached = path_of(cache)
    cached.chmod(0o600)
    cached.write_bytes(b"import os; os.system('steal')\n")
    with pytest.raises(Invalid, match="not what its sha256 names"):
        path_of(cache)
    assert not cached.exists()
    assert path_of(cache).read_bytes() == PROGRAM
    assert server.downloads == 2


def test_a_cached_copy_replaced_by_a_link_is_refused(tmp_path: Path) -> None:
    server = Server()
    cache = ArtifactCache(tmp_path / "cache", server.download)
    cached = path_of(cache)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(PROGRAM)  # the right bytes, but not the cache's own file
    cached.unlink()
    cached.symlink_to(elsewhere)
    with pytest.raises(OSError, match="symbolic links"):  # ELOOP: opened without following
        path_of(cache)


def test_a_name_that_is_not_a_sha256_is_refused_before_any_download(tmp_path: Path) -> None:
    server = Server()
    cache = ArtifactCache(tmp_path / "cache", server.download)
    for name in ("../../etc/passwd", SHA256.upper(), SHA256[:-1], ""):
        with pytest.raises(Invalid, match="not named by a sha256"):
            path_of(cache, name)
    assert server.downloads == 0


def test_a_download_a_dead_worker_left_half_done_is_removed_at_start(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    directory.mkdir()
    partial = directory / f"{SHA256}.{os.getpid() + 1}.partial"
    partial.write_bytes(PROGRAM[:5])
    ArtifactCache(directory, Server().download)
    assert not partial.exists()
