"""An image's layers stacked into one root: hostile members refused before they reach
outside it, whiteouts and opaque directories honoured, the bound held."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from herder.worker.image_layers import Budget, LayerRefused, apply_layer, member_path
from tests.images import Member, digest, directory, layer_tar, symlink

ROOMY = Budget(max_bytes=64 * 1024 * 1024, max_entries=10_000)


def stack(root: Path, *layers: list[Member], budget: Budget = ROOMY) -> list[str]:
    return [apply_layer(root, io.BytesIO(layer_tar(members)), budget) for members in layers]


HOSTILE = {
    "parent escape": ([Member("../x", b"out")], "'..'"),
    "deep parent escape": ([Member("a/../../x", b"out")], "'..'"),
    "absolute path": ([Member("/etc/x", b"out")], "absolute"),
    "file through a symlink": (
        [symlink("link", "/tmp"), Member("link/x", b"out")],
        "symbolic link",
    ),
    "file through a relative symlink": (
        [symlink("up", ".."), Member("up/x", b"out")],
        "symbolic link",
    ),
    "character device": ([Member("dev/mem", kind=tarfile.CHRTYPE)], "device"),
    "block device": ([Member("dev/sda", kind=tarfile.BLKTYPE)], "device"),
    "fifo": ([Member("pipe", kind=tarfile.FIFOTYPE)], "device"),
    "hardlink escaping": ([Member("passwd", kind=tarfile.LNKTYPE, link="../../etc/passwd")], ".."),
    "hardlink to the host": (
        [Member("shadow", kind=tarfile.LNKTYPE, link="/etc/shadow")],
        "absolute",
    ),
    "hardlink to a file of no layer": (
        [Member("x", kind=tarfile.LNKTYPE, link="etc/passwd")],
        "not to a file this layer",
    ),
    "whiteout of the parent": (
        [
            Member("a/.wh..."),
        ],
        "no single name",
    ),
    "whiteout through a symlink": ([symlink("link", "/"), Member("link/.wh.etc")], "symbolic link"),
}


@pytest.mark.parametrize(("members", "why"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_members_are_refused_and_nothing_leaves_the_root(
    tmp_path: Path, members: list[Member], why: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = sorted(os.listdir(tmp_path))
    with pytest.raises(LayerRefused, match=why):
        stack(root, members)
    assert sorted(os.listdir(tmp_path)) == outside


def test_a_hardlink_to_a_file_of_a_lower_layer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LayerRefused, match="not to a file this layer"):
        stack(tmp_path, [Member("a", b"lower")], [Member("b", kind=tarfile.LNKTYPE, link="a")])


def test_a_hardlink_inside_the_layer_shares_the_file(tmp_path: Path) -> None:
    stack(tmp_path, [Member("a", b"same"), Member("b", kind=tarfile.LNKTYPE, link="a")])
    assert (tmp_path / "a").stat().st_ino == (tmp_path / "b").stat().st_ino


def test_setuid_and_setgid_bits_are_stripped_and_files_readable_by_anyone(tmp_path: Path) -> None:
    stack(tmp_path, [Member("su", b"x", mode=0o6755), Member("secret", b"x", mode=0o700)])
    assert stat.S_IMODE((tmp_path / "su").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "secret").stat().st_mode) == 0o755


def test_symlinks_are_made_as_they_are_never_followed(tmp_path: Path) -> None:
    stack(tmp_path, [symlink("etc-link", "/etc"), symlink("sh", "busybox")])
    assert os.readlink(tmp_path / "etc-link") == "/etc"
    stack(tmp_path, [Member("etc-link", b"a file now")])  # replaces the link, not /etc
    assert (tmp_path / "etc-link").read_bytes() == b"a file now"


def test_an_upper_layer_replaces_files_and_whites_out_files_and_directories(tmp_path: Path) -> None:
    stack(
        tmp_path,
        [Member("etc/greeting", b"base"), Member("etc/gone", b"x"), Member("opt/old/f", b"x")],
        [Member("etc/greeting", b"top"), Member("etc/.wh.gone"), Member("opt/.wh.old")],
    )
    assert (tmp_path / "etc/greeting").read_bytes() == b"top"
    assert not (tmp_path / "etc/gone").exists()
    assert list((tmp_path / "opt").iterdir()) == []


def test_an_opaque_directory_hides_what_is_below_but_keeps_its_own_layer(tmp_path: Path) -> None:
    stack(
        tmp_path,
        [Member("data/lower", b"x"), Member("data/sub/lower", b"x")],
        [Member("data/mine", b"kept"), Member("data/.wh..wh..opq"), Member("data/sub2/f", b"y")],
    )
    assert sorted(path.name for path in (tmp_path / "data").iterdir()) == ["mine", "sub2"]


def test_a_whiteout_never_removes_what_its_own_layer_wrote(tmp_path: Path) -> None:
    stack(tmp_path, [Member("x", b"mine"), Member(".wh.x")])
    assert (tmp_path / "x").read_bytes() == b"mine"


def test_a_directory_replaces_a_file_and_a_file_a_directory(tmp_path: Path) -> None:
    stack(
        tmp_path,
        [Member("a", b"file"), Member("b/inner", b"x")],
        [directory("a"), Member("b", b"file")],
    )
    assert (tmp_path / "a").is_dir()
    assert (tmp_path / "b").read_bytes() == b"file"


def test_the_budget_bounds_bytes_and_entries_across_layers(tmp_path: Path) -> None:
    small = Budget(max_bytes=1024 * 1024, max_entries=100)
    stack(tmp_path, [Member("half", b"x" * 600_000)], budget=small)
    with pytest.raises(LayerRefused, match="more than 1 MiB"):
        stack(tmp_path, [Member("more", b"x" * 600_000)], budget=small)
    many = Budget(max_bytes=1024 * 1024, max_entries=3)
    with pytest.raises(LayerRefused, match="more than 3 files"):
        stack(tmp_path, [Member(f"f{n}", b"") for n in range(4)], budget=many)


def test_empty_directories_count_by_the_blocks_and_inodes_they_take(tmp_path: Path) -> None:
    """No file bytes, but each a block and an inode on the worker's disk (issue 40, item 9)."""
    small = Budget(max_bytes=1024 * 1024, max_entries=10_000)
    with pytest.raises(LayerRefused, match="more than 1 MiB"):
        stack(tmp_path, [directory(f"d{n}") for n in range(300)], budget=small)


def test_the_directories_a_deep_path_makes_count_as_entries(tmp_path: Path) -> None:
    """One member can make thousands of directories on the way to it."""
    few = Budget(max_bytes=1024 * 1024, max_entries=10)
    deep = "/".join(["d"] * 20) + "/file"
    with pytest.raises(LayerRefused, match="more than 10 files and directories"):
        stack(tmp_path, [Member(deep, b"x")], budget=few)


def test_the_diff_id_is_the_uncompressed_tar_digest_plain_or_gzipped(tmp_path: Path) -> None:
    layer = layer_tar([Member("a", b"x")])
    assert apply_layer(tmp_path, io.BytesIO(layer), ROOMY) == digest(layer)
    assert apply_layer(tmp_path, io.BytesIO(gzip.compress(layer)), ROOMY) == digest(layer)


def test_garbage_and_zstd_layers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(LayerRefused, match="not a valid layer"):
        apply_layer(tmp_path, io.BytesIO(b"\x1f\x8b" + b"garbage" * 100), ROOMY)
    with pytest.raises(LayerRefused, match="zstd"):
        apply_layer(tmp_path, io.BytesIO(b"\x28\xb5\x2f\xfd" + b"\0" * 100), ROOMY)


@pytest.mark.parametrize("name", ["./a/b", "a//b/", "a/./b"])
def test_member_paths_are_normalised(name: str) -> None:
    assert str(member_path(name)) == "a/b"


def test_a_header_declaring_more_than_its_bound_is_never_read_whole(tmp_path: Path) -> None:
    """A pax header of 16 MiB (compressed to almost nothing) would be read into memory at
    once; it is refused before, and a layer past the budget is refused as it decompresses."""
    header = tarfile.TarInfo("bomb")
    header.type = tarfile.XHDTYPE
    header.size = 16 * 1024 * 1024
    buffer = io.BytesIO()
    buffer.write(header.tobuf(format=tarfile.USTAR_FORMAT))
    buffer.write(b"0" * header.size)
    bomb = gzip.compress(buffer.getvalue() + b"\0" * 1024)
    assert len(bomb) < 100_000
    with pytest.raises(LayerRefused, match="header larger than"):
        apply_layer(tmp_path, io.BytesIO(bomb), ROOMY)
    with pytest.raises(LayerRefused, match="more than 1 MiB of tar"):
        apply_layer(tmp_path, io.BytesIO(bomb), Budget(max_bytes=1024 * 1024, max_entries=0))
