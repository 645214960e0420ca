"""The blob store (a directory) of the cold tier, programs and checkpoints, and where the
settings put it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from herder.settings import Settings
from herder.store.cold.blobs import DirectoryBlobStore, blob_store_at, put_bytes


def test_a_directory_store_writes_whole_private_files(tmp_path: Path) -> None:
    blobs = DirectoryBlobStore(tmp_path / "cold")
    put_bytes(blobs, "runs/p20270308/manifest.json", b"first")
    put_bytes(blobs, "runs/p20270308/manifest.json", b"second")
    assert blobs.get("runs/p20270308/manifest.json") == b"second"
    written = tmp_path / "cold" / "runs" / "p20270308" / "manifest.json"
    assert written.stat().st_mode & 0o777 == 0o600
    assert [path.name for path in written.parent.iterdir()] == ["manifest.json"]  # no temp
    blobs.delete("runs/p20270308/manifest.json")
    blobs.delete("runs/p20270308/manifest.json")
    assert blobs.get("runs/p20270308/manifest.json") is None


def test_a_directory_store_streams_in_and_out_in_pieces(tmp_path: Path) -> None:
    blobs = DirectoryBlobStore(tmp_path / "cold")
    content = bytes(range(256)) * 10_000  # 2.4 MiB: three pieces
    source = io.BytesIO(b"skipped" + content)
    source.seek(len(b"skipped"))
    blobs.put_stream("checkpoints/ten_1/abc", source)
    pieces = blobs.stream("checkpoints/ten_1/abc")
    assert pieces is not None
    read = list(pieces)
    assert b"".join(read) == content
    assert len(read) == 3
    assert blobs.stream("checkpoints/ten_1/missing") is None


def test_a_key_cannot_leave_the_store(tmp_path: Path) -> None:
    blobs = DirectoryBlobStore(tmp_path / "cold")
    with pytest.raises(ValueError, match="leaves the store"):
        put_bytes(blobs, "../outside", b"x")
    assert not (tmp_path / "outside").exists()


def test_the_cold_store_is_a_directory_url(tmp_path: Path) -> None:
    store = blob_store_at((tmp_path / "a b").as_uri())
    assert isinstance(store, DirectoryBlobStore)
    assert store.root == tmp_path / "a b"
    with pytest.raises(ValueError, match="HERDER_COLD_STORE"):
        blob_store_at("ftp://host/cold")


def test_sqlite_has_no_cold_tier_and_postgresql_defaults_to_the_home(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, database_url=f"sqlite:///{tmp_path}/herder.db")
    assert settings.cold_tier() is None
    postgres = Settings(home=tmp_path, database_url="postgresql+psycopg://h/db", hot_days=30)
    tier = postgres.cold_tier()
    assert tier is not None
    assert tier.hot_days == 30
    assert isinstance(tier.blobs, DirectoryBlobStore)
    assert tier.blobs.root == tmp_path / "cold"


def test_a_hot_window_is_at_least_a_day(tmp_path: Path) -> None:
    postgres = Settings(home=tmp_path, database_url="postgresql+psycopg://h/db", hot_days=0)
    with pytest.raises(ValueError, match="HERDER_HOT_DAYS"):
        postgres.cold_tier()


def test_checkpoints_go_to_the_cold_store_only_when_one_is_named(tmp_path: Path) -> None:
    for url in (f"sqlite:///{tmp_path}/herder.db", "postgresql+psycopg://h/db"):
        assert Settings(home=tmp_path, database_url=url).checkpoint_blobs() is None
        named = Settings(home=tmp_path, database_url=url, cold_store=(tmp_path / "c").as_uri())
        blobs = named.checkpoint_blobs()
        assert isinstance(blobs, DirectoryBlobStore)
        assert blobs.root == tmp_path / "c"


def test_programs_go_to_the_blob_store_on_either_database_by_default_the_homes(
    tmp_path: Path,
) -> None:
    """``herder up`` needs nothing set: programs go to the home's ``cold/``, as the cold
    tier's history does; a named store takes them all."""
    for url in (f"sqlite:///{tmp_path}/herder.db", "postgresql+psycopg://h/db"):
        default = Settings(home=tmp_path, database_url=url).artifact_blobs()
        assert isinstance(default, DirectoryBlobStore)
        assert default.root == tmp_path / "cold"
        named = Settings(home=tmp_path, database_url=url, cold_store=(tmp_path / "c").as_uri())
        blobs = named.artifact_blobs()
        assert isinstance(blobs, DirectoryBlobStore)
        assert blobs.root == tmp_path / "c"
