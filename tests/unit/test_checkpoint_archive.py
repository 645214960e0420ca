"""A checkpoint directory as a gzip'd tar: files, directories and links saved as they are,
bounded by checkpoint_mb before a byte is written, never waiting on nor following what the job
swaps in while it is packed; restored refusing whatever could reach outside the directory or
expand past its bound."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from herder.worker.archive import ArchiveRefused
from herder.worker.checkpoint_archive import GZIP_LEVEL, PROBE_BYTES, pack, unpack

MIB = 1024 * 1024
ENTRIES = 10_000


def packed(directory: Path, max_bytes: int = 64 * MIB) -> io.BytesIO:
    sink = io.BytesIO()
    pack(directory, sink, max_bytes)
    sink.seek(0)
    return sink


def restored(archive: io.BytesIO | Path, into: Path, max_bytes: int = 64 * MIB) -> None:
    into.mkdir(exist_ok=True)
    data = archive.getvalue() if isinstance(archive, io.BytesIO) else archive.read_bytes()
    source = into.parent / "archive.tar.gz"
    source.write_bytes(data)
    with source.open("rb") as opened:
        unpack(into, opened, max_bytes, ENTRIES)


def hostile(tmp_path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    path = tmp_path / "hostile.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for member, data in members:
            member.size = len(data) if member.isreg() else 0
            archive.addfile(member, io.BytesIO(data) if member.isreg() else None)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, **fields: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def test_files_directories_and_links_come_back_as_they_were(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    (saved / "model").mkdir(parents=True)
    (saved / "model" / "weights.bin").write_bytes(os.urandom(4096))
    (saved / "step").write_text("41\n")
    (saved / "step").chmod(0o640)
    (saved / "latest").symlink_to("model/weights.bin")
    (saved / "elsewhere").symlink_to("/etc/passwd")
    os.mkfifo(saved / "pipe")
    restored(packed(saved), tmp_path / "back")
    back = tmp_path / "back"
    assert sorted(os.listdir(back)) == ["latest", "model", "step"]
    assert (back / "model" / "weights.bin").read_bytes() == (
        saved / "model" / "weights.bin"
    ).read_bytes()
    assert os.readlink(back / "latest") == "model/weights.bin"
    assert stat.S_IMODE((back / "step").stat().st_mode) == 0o640


def test_a_link_is_stored_never_followed_and_one_leading_out_is_skipped(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    (saved / "sub").mkdir(parents=True)
    (saved / "sub" / "up").symlink_to("../data")  # inside: kept, though it leads nowhere yet
    (saved / "absolute").symlink_to("/etc/passwd")
    (saved / "sub" / "above").symlink_to("../../etc/passwd")
    os.mkfifo(saved / "pipe")
    with tarfile.open(fileobj=packed(saved), mode="r:gz") as archive:
        members = {member.name: member for member in archive}
    assert list(members) == ["sub", "sub/up"]
    assert members["sub/up"].issym()
    assert members["sub/up"].linkname == "../data"


def test_what_compresses_is_gzipped_at_the_fastest_level_and_what_would_not_is_stored(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "saved"
    saved.mkdir()
    noise = os.urandom(4 * PROBE_BYTES)
    (saved / "noise").write_bytes(noise)
    (saved / "zeros").write_bytes(bytes(4 * PROBE_BYTES))
    archive = packed(saved).getvalue()
    assert archive[:2] == b"\x1f\x8b"
    assert GZIP_LEVEL == 1
    assert len(noise) < len(archive) < len(noise) + 16 * 1024  # stored, zeros nearly nothing
    restored(io.BytesIO(archive), tmp_path / "back")  # one .tar.gz of several gzip members
    assert (tmp_path / "back" / "noise").read_bytes() == noise
    assert (tmp_path / "back" / "zeros").read_bytes() == bytes(4 * PROBE_BYTES)


def test_a_directory_past_checkpoint_mb_is_refused_before_a_byte_is_written(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "saved"
    saved.mkdir()
    with (saved / "sparse").open("wb") as sparse:
        sparse.truncate(2 * MIB + 1)  # no block on the disk: its apparent size counts
    sink = io.BytesIO()
    with pytest.raises(ArchiveRefused, match=r"holds 2097153 bytes, more than its checkpoint_mb"):
        pack(saved, sink, 2 * MIB)
    assert sink.getvalue() == b""


@pytest.mark.parametrize(
    ("hostile_member", "why"),
    [
        (member("../outside"), "outside"),
        (member("/etc/evil"), "absolute path"),
        (member("out", tarfile.SYMTYPE, linkname="/etc/passwd"), "absolute path"),
        (member("out", tarfile.SYMTYPE, linkname="../../etc/passwd"), "leads outside"),
        (member("hard", tarfile.LNKTYPE, linkname="/etc/passwd"), "neither a file"),
        (member("null", tarfile.CHRTYPE, devmajor=1, devminor=3), "neither a file"),
        (member("fifo", tarfile.FIFOTYPE), "neither a file"),
    ],
)
def test_a_member_that_could_reach_outside_is_refused_and_nothing_is_written(
    tmp_path: Path, hostile_member: tarfile.TarInfo, why: str
) -> None:
    archive = hostile(tmp_path, (member("fine"), b"ok"), (hostile_member, b"x"))
    with pytest.raises(ArchiveRefused, match=why):
        restored(archive, tmp_path / "back")
    assert os.listdir(tmp_path / "back") == []


def test_a_hard_link_to_a_file_inside_is_refused_too(tmp_path: Path) -> None:
    archive = hostile(
        tmp_path, (member("a"), b"x"), (member("b", tarfile.LNKTYPE, linkname="a"), b"")
    )
    with pytest.raises(ArchiveRefused, match="'b' is neither a file"):
        restored(archive, tmp_path / "back")


def test_setuid_setgid_and_sticky_bits_are_dropped(tmp_path: Path) -> None:
    archive = hostile(tmp_path, (member("tool", mode=0o6755), b"#!/bin/sh\n"))
    restored(archive, tmp_path / "back")
    assert stat.S_IMODE((tmp_path / "back" / "tool").stat().st_mode) == 0o755


def test_a_gzip_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.tar.gz"
    with tarfile.open(bomb, "w:gz", compresslevel=9) as archive:
        zeros = member("zeros", size=64 * MIB)
        archive.addfile(zeros, io.BytesIO(bytes(64 * MIB)))
    assert bomb.stat().st_size < MIB
    with pytest.raises(ArchiveRefused, match="more than the 4194304 bytes"):
        restored(bomb, tmp_path / "back", max_bytes=4 * MIB)
    assert os.listdir(tmp_path / "back") == []


def test_a_huge_sparse_member_is_refused_by_what_it_declares(tmp_path: Path) -> None:
    """Its header declares 1 TiB; not a byte of it needs to exist for the refusal."""
    header = member("huge", size=1 << 40).tobuf(tarfile.PAX_FORMAT)
    archive = tmp_path / "huge.tar.gz"
    archive.write_bytes(gzip.compress(header + bytes(tarfile.BLOCKSIZE)))
    with pytest.raises(ArchiveRefused, match="unpacks to at least 1099511627776 bytes"):
        restored(archive, tmp_path / "back")
    assert os.listdir(tmp_path / "back") == []


def test_something_that_is_not_a_gzipd_tar_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(b"PK\x03\x04 a zip is not a checkpoint")
    with pytest.raises(ArchiveRefused, match="not a gzip'd tar"):
        restored(junk, tmp_path / "back")
    truncated = tmp_path / "truncated"
    truncated.write_bytes(gzip.compress(b"\x00" * 100))
    with pytest.raises(ArchiveRefused, match="not a valid gzip'd tar"):
        restored(truncated, tmp_path / "back")


class SwapsOnFirstWrite(io.BytesIO):
    """A sink that lets the job act once the packer has listed the directory and begun to
    write: ``swap`` runs at the first write."""

    def __init__(self, swap: Callable[[], None]) -> None:
        super().__init__()
        self.swap: Callable[[], None] | None = swap

    def write(self, data: Any) -> int:
        if self.swap is not None:
            swap, self.swap = self.swap, None
            swap()
        return super().write(data)


def listed_then_swapped(directory: Path, swap: Callable[[], None]) -> io.BytesIO:
    sink = SwapsOnFirstWrite(swap)
    pack(directory, sink, 64 * MIB)
    sink.seek(0)
    return sink


def test_a_file_swapped_for_a_fifo_after_the_listing_refuses_the_save_without_waiting(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "a").write_text("first\n")
    (saved / "b").write_text("second\n")

    def fifo_for_b() -> None:
        (saved / "b").unlink()
        os.mkfifo(saved / "b")  # opened for reading as it was, it would wait for a writer

    with pytest.raises(ArchiveRefused, match="'b' changed while it was packed"):
        listed_then_swapped(saved, fifo_for_b)


def test_a_directory_swapped_for_a_link_after_the_listing_refuses_the_save(
    tmp_path: Path,
) -> None:
    saved, outside = tmp_path / "saved", tmp_path / "outside"
    (saved / "a").mkdir(parents=True)
    (saved / "b").mkdir()
    (saved / "b" / "step").write_text("1\n")
    outside.mkdir()
    (outside / "step").write_text("not the job's\n")

    def link_for_b() -> None:
        (saved / "b" / "step").unlink()
        (saved / "b").rmdir()
        (saved / "b").symlink_to(outside)

    with pytest.raises(ArchiveRefused, match="'b/step' changed while it was packed"):
        listed_then_swapped(saved, link_for_b)


def test_a_file_renamed_into_place_after_the_listing_is_saved_whole(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "a").write_text("first\n")
    (saved / "step").write_text("1\n")

    def step_renamed() -> None:
        (saved / "step.new").write_text("12345\n")
        (saved / "step.new").rename(saved / "step")

    archive = listed_then_swapped(saved, step_renamed)
    restored(archive, tmp_path / "back")
    assert (tmp_path / "back" / "step").read_text() == "12345\n"
