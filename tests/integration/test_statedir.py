"""The worker's state directories are used only when no one else could have prepared them."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
import typer

from herder.cli.common import app
from herder.worker.statedir import UnsafeStateDirectory, secure_directory

OTHER_UID = 61777
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making another uid's files needs root")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_it_is_made_private_with_its_parents(tmp_path: Path) -> None:
    made = secure_directory(tmp_path / "a" / "b")
    assert made == tmp_path / "a" / "b"
    assert (mode(made), made.lstat().st_uid) == (0o700, os.geteuid())


def test_an_existing_directory_too_open_is_closed(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir(mode=0o755)
    (tmp_path / "home").chmod(0o755)
    assert mode(secure_directory(tmp_path / "home")) == 0o700


def test_a_symlink_is_never_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "state").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeStateDirectory, match="symlink"):
        secure_directory(tmp_path / "state")


@needs_root
def test_a_directory_someone_else_made_is_refused(tmp_path: Path) -> None:
    planted = tmp_path / "herder-attempts-x"
    planted.mkdir()
    os.chown(planted, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeStateDirectory, match=f"belongs to uid {OTHER_UID}") as refused:
        secure_directory(planted)
    options = re.findall(r"herder worker (--[a-z-]+)", str(refused.value))
    assert options == ["--home"]
    assert all(option in worker_options() for option in options)  # an option that exists


def worker_options() -> set[str]:
    command = typer.main.get_command(app)
    assert isinstance(command, typer.core.TyperGroup)
    worker = command.commands["worker"]
    return {name for parameter in worker.params for name in getattr(parameter, "opts", [])}


@needs_root
def test_a_parent_others_may_rename_things_in_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone could swap what is inside
    with pytest.raises(UnsafeStateDirectory, match="writable by others"):
        secure_directory(shared / "state")
    shared.chmod(0o1777)  # sticky, like /tmp: only owners rename their own
    assert secure_directory(shared / "state").is_dir()


@needs_root
def test_a_parent_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeStateDirectory, match="not by root"):
        secure_directory(theirs / "state")
