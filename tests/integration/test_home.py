"""The server's home and SQLite database are private at every start (issue 9, item 6): a job
on the same host must not read another tenant's job environment from the database."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from herder.server import prepare
from herder.settings import Settings, sqlite_url

DATABASE_FILES = ("herder.db", "herder.db-wal", "herder.db-shm")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _start(home: Path) -> None:
    prepare(Settings(home=home, database_url=sqlite_url(home / "herder.db"))).store.close()


def test_a_first_start_makes_everything_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    prepared = prepare(Settings(home=home, database_url=sqlite_url(home / "herder.db")))
    try:
        prepared.store.access.create_tenant("touch")  # a write: SQLite's -wal and -shm exist
        assert _mode(home) == 0o700
        for name in DATABASE_FILES:
            assert _mode(home / name) == 0o600, name
        for path in home.iterdir():
            assert not _mode(path) & 0o077, path
    finally:
        prepared.store.close()


def test_a_world_readable_home_and_database_are_corrected_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    _start(home)
    home.chmod(0o755)
    for name in DATABASE_FILES:
        (home / name).touch()
        (home / name).chmod(0o644)
    (home / "herder.db-journal").write_bytes(b"")
    (home / "herder.db-journal").chmod(0o666)
    with caplog.at_level(logging.WARNING, logger="herder.server"):
        _start(home)
    assert _mode(home) == 0o700
    assert _mode(home / "herder.db") == 0o600  # (SQLite removed its own files on closing)
    said = caplog.text
    assert f"{home} was mode 0755, now 0700" in said
    for name in DATABASE_FILES:
        assert f"{home / name} was mode 0644, now 0600" in said
    assert f"{home / 'herder.db-journal'} was mode 0666, now 0600" in said


def test_a_private_home_is_left_alone_and_nothing_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    _start(home)
    with caplog.at_level(logging.WARNING, logger="herder.server"):
        _start(home)
    assert "made private" not in caplog.text


def test_a_symlinked_database_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (tmp_path / "elsewhere.db").touch()
    (home / "herder.db").symlink_to(tmp_path / "elsewhere.db")
    with pytest.raises(SystemExit, match="symbolic link"):
        _start(home)
