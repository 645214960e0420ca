"""What an archive may unpack to: declared sizes, ratios, entries and lying headers refused
before anything is written; what would reach outside the workspace refused; nothing nested."""

from __future__ import annotations

import io
import os
import stat
import struct
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest

from herder.worker.archive import (
    MAX_HEADER_BYTES,
    REFUSED,
    ArchiveRefused,
    Bound,
    try_unpack,
    unpack,
)

MIB = 1024 * 1024
TarWriteMode = Literal["w", "w:gz", "w:bz2", "w:xz"]
ROOMY = Bound(max_bytes=64 * MIB, max_entries=10_000)


def tar(path: Path, members: list[tarfile.TarInfo], mode: TarWriteMode = "w") -> Path:
    with tarfile.open(path, mode) as archive:
        for member in members:
            data = b"x" * member.size
            archive.addfile(member, io.BytesIO(data) if member.isreg() else None)
    return path


def tar_member(name: str, size: int = 1, **changes: Any) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.size = size
    for key, value in changes.items():
        setattr(member, key, value)
    return member


def zip_archive(path: Path, members: dict[str | zipfile.ZipInfo, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def symlink_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def barely_compressible(size: int) -> bytes:
    """Two symbols at random: about 7:1 under deflate, far from a bomb."""
    return os.urandom(size).translate(bytes(b"ab"[byte & 1] for byte in range(256)))


def zip_declaring(path: Path, data: bytes, *, file_size: int | None = None,
                  compress_size: int | None = None) -> Path:  # fmt: skip
    """A zip of one member whose headers declare other sizes than its data has: both the
    local header and the central directory lie alike."""
    zip_archive(path, {"member": data})
    raw = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 18), (b"PK\x01\x02", 20)):
        at = raw.index(signature) + offset
        declared = list(struct.unpack_from("<II", raw, at))
        declared = [compress_size or declared[0], file_size or declared[1]]
        struct.pack_into("<II", raw, at, *declared)
    path.write_bytes(bytes(raw))
    return path


def unpacked(workspace: Path, archive: Path, bound: Bound = ROOMY) -> None:
    with archive.open("rb") as source:
        unpack(workspace, source, bound)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


# what an archive declares, against the room it is given: refused before a byte is written
BOUNDED: list[tuple[str, Callable[[Path], Path], Bound, str]] = [
    (
        "zip-past-the-disk",
        lambda d: zip_archive(d / "a.zip", {"a": barely_compressible(300_000)}),
        Bound(max_bytes=100_000, max_entries=100),
        "at least 300000 bytes, more than the 100000 bytes free on the attempt's disk",
    ),
    (
        "zip-member-of-zeros",
        lambda d: zip_archive(d / "a.zip", {"noise": os.urandom(200_000), "zeros": bytes(4 * MIB)}),
        ROOMY,
        "member 'zeros' expands more than 100 times",
    ),
    (
        "zip-lying-compressed-size",  # passes the member's ratio, not the archive's
        lambda d: zip_declaring(d / "a.zip", bytes(2 * MIB), compress_size=30_000),
        ROOMY,
        "more than 100 times its size: refused as a zip bomb",
    ),
    (
        "zip-too-many-entries",
        lambda d: zip_archive(d / "a.zip", {f"f{index}": b"" for index in range(11)}),
        Bound(max_bytes=MIB, max_entries=10),
        "more than 10 entries",
    ),
    (
        "tar-past-the-disk",
        lambda d: tar(d / "a.tar", [tar_member("a", 60_000), tar_member("b", 60_000)]),
        Bound(max_bytes=100_000, max_entries=100),
        "at least 120000 bytes, more than the 100000 bytes free",
    ),
    (
        "tar-gz-of-zeros",
        lambda d: tar(d / "a.tgz", [tar_member("zeros", 8 * MIB)], "w:gz"),
        ROOMY,
        "more than 100 times its size",
    ),
    (
        "tar-too-many-entries",
        lambda d: tar(d / "a.tar", [tar_member(f"f{index}", 0) for index in range(11)]),
        Bound(max_bytes=MIB, max_entries=10),
        "more than 10 entries",
    ),
    (
        "tar-huge-pax-header",
        lambda d: tar(
            d / "a.tgz",
            [tar_member("a", pax_headers={"comment": "x" * (MAX_HEADER_BYTES + 1)})],
            "w:gz",
        ),
        Bound(max_bytes=1024 * MIB, max_entries=100, max_ratio=100_000),
        "a header larger than",
    ),
]


@pytest.mark.parametrize(
    ("make", "bound", "why"),
    [pytest.param(make, bound, why, id=name) for name, make, bound, why in BOUNDED],
)
def test_an_archive_past_its_bound_is_refused_before_anything_is_written(
    workspace: Path, tmp_path: Path, make: Callable[[Path], Path], bound: Bound, why: str
) -> None:
    archive = make(tmp_path)
    with pytest.raises(ArchiveRefused, match=why):
        unpacked(workspace, archive, bound)
    assert list(workspace.iterdir()) == []


def test_a_small_file_of_one_byte_repeated_is_no_bomb(workspace: Path, tmp_path: Path) -> None:
    archive = zip_archive(tmp_path / "a.zip", {"spaces": b" " * 500_000})
    unpacked(workspace, archive)
    assert (workspace / "spaces").stat().st_size == 500_000


def test_a_zip_holding_more_than_it_declares_stops_at_the_declared_size(
    workspace: Path, tmp_path: Path
) -> None:
    archive = zip_declaring(tmp_path / "a.zip", barely_compressible(200_000), file_size=1000)
    with pytest.raises(ArchiveRefused):
        unpacked(workspace, archive)
    assert (workspace / "member").stat().st_size <= 1000


def test_an_archive_inside_an_archive_stays_a_file(workspace: Path, tmp_path: Path) -> None:
    inner = zip_archive(tmp_path / "inner.zip", {"zeros": bytes(100 * MIB)})
    archive = zip_archive(tmp_path / "outer.zip", {"inner.zip": inner.read_bytes()})
    unpacked(workspace, archive)
    assert [path.name for path in workspace.iterdir()] == ["inner.zip"]
    assert (workspace / "inner.zip").read_bytes() == inner.read_bytes()


def test_a_refusal_says_why_in_a_users_words(tmp_path: Path) -> None:
    archive = zip_archive(tmp_path / "a.zip", {"../evil": b"x"})
    with archive.open("rb") as source:
        assert try_unpack(tmp_path, source, ROOMY) == (
            REFUSED,
            "member '../evil' would land outside the workspace",
        )


# --- what would reach outside ---------------------------------------------------------------

OUTSIDE: list[tuple[str, Callable[[Path], Path], str]] = [
    ("tar-dotdot", lambda d: tar(d / "a.tar", [tar_member("../evil")]), "outside"),
    (
        "tar-absolute-link",
        lambda d: tar(d / "a.tar", [tar_member("link", 0, type=tarfile.SYMTYPE, linkname="/")]),
        "absolute",
    ),
    (
        "tar-link-up-and-through",
        lambda d: tar(
            d / "a.tar",
            [
                tar_member("up", 0, type=tarfile.SYMTYPE, linkname=".."),
                tar_member("up/evil"),
            ],
        ),
        "outside",
    ),
    ("tar-absolute-path", lambda d: tar(d / "a.tar", [tar_member("/tmp/evil")]), "absolute"),
    (
        "tar-device",
        lambda d: tar(d / "a.tar", [tar_member("dev", 0, type=tarfile.CHRTYPE)]),
        "device",
    ),
    ("zip-dotdot", lambda d: zip_archive(d / "a.zip", {"ok": b"x", "../x": b"x"}), "outside"),
    ("zip-absolute", lambda d: zip_archive(d / "a.zip", {"/tmp/evil": b"x"}), "outside"),
    ("zip-symlink", lambda d: zip_archive(d / "a.zip", {symlink_info("l"): b"/etc"}), "link"),
]


@pytest.mark.parametrize(
    ("make", "why"), [pytest.param(make, why, id=name) for name, make, why in OUTSIDE]
)
def test_unpack_refuses_what_would_reach_outside(
    workspace: Path, tmp_path: Path, make: Callable[[Path], Path], why: str
) -> None:
    archive = make(tmp_path)
    with pytest.raises(ArchiveRefused, match=why):
        unpacked(workspace, archive)
    assert list(workspace.iterdir()) == []  # checked before anything is written
    assert not (tmp_path / "evil").exists()
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("mode", ["w", "w:gz", "w:bz2", "w:xz"])
def test_unpack_accepts_a_tar_compressed_or_not(
    workspace: Path, tmp_path: Path, mode: TarWriteMode
) -> None:
    archive = tar(
        tmp_path / "job.tar",
        [
            tar_member("pkg", 0, type=tarfile.DIRTYPE, mode=0o755),
            tar_member("pkg/run.sh", 3, mode=0o755),
            tar_member("pkg/link", 0, type=tarfile.SYMTYPE, linkname="run.sh"),
        ],
        mode=mode,
    )
    unpacked(workspace, archive)
    assert (workspace / "pkg" / "run.sh").read_bytes() == b"xxx"
    assert os.access(workspace / "pkg" / "run.sh", os.X_OK)
    assert os.readlink(workspace / "pkg" / "link") == "run.sh"


def test_unpack_accepts_a_zip(workspace: Path, tmp_path: Path) -> None:
    archive = zip_archive(tmp_path / "job.zip", {"pkg/": b"", "pkg/main.py": b"print(1)\n"})
    unpacked(workspace, archive)
    assert (workspace / "pkg" / "main.py").read_text() == "print(1)\n"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\x1f\x8b\x08\x00garbage", "not a valid"),
        (b"just some text", "not a .tar, .tar.gz or .zip"),
    ],
)
def test_unpack_refuses_what_is_not_an_archive(
    workspace: Path, tmp_path: Path, content: bytes, why: str
) -> None:
    (tmp_path / "blob").write_bytes(content)
    with pytest.raises(ArchiveRefused, match=why):
        unpacked(workspace, tmp_path / "blob")


def test_unpack_refuses_a_truncated_zip(workspace: Path, tmp_path: Path) -> None:
    archive = zip_archive(tmp_path / "job.zip", {"a": os.urandom(50_000)})
    data = archive.read_bytes()
    archive.write_bytes(data[:1000] + data[-22:])  # central directory kept, data cut
    with pytest.raises(ArchiveRefused, match="not a valid"):
        unpacked(workspace, archive)
