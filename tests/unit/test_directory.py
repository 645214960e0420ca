"""The directory (``herder/directory``) on SQLite: cells in regions, the first the default,
tenants placed once and looked up; a tenant placed in one cell is never moved by placing it
in another. (The edge's tests run it on PostgreSQL too.)"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from herder.directory.repository import Directory
from herder.domain.errors import Conflict, NotFound, TemporarilyUnavailable
from herder.settings import sqlite_url

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.fixture
def directory(tmp_path: Path) -> Iterator[Directory]:
    opened = Directory(sqlite_url(tmp_path / "directory.db"))
    yield opened
    opened.close()


def test_the_first_cell_is_the_default_and_cells_list_by_name(directory: Directory) -> None:
    assert directory.default_cell() is None
    first = directory.create_cell("eu-1", "eu", "http://10.0.0.1:8080/", NOW)
    directory.create_cell("eu-0", "eu", "http://10.0.0.2:8080", NOW)
    directory.create_cell("us-1", "us", "https://us-1.internal", NOW)
    assert first.is_default
    assert first.api_url == "http://10.0.0.1:8080"  # no trailing slash: paths are appended
    assert [(cell.name, cell.region, cell.is_default) for cell in directory.cells()] == [
        ("eu-0", "eu", False), ("eu-1", "eu", True), ("us-1", "us", False),
    ]  # fmt: skip
    assert directory.default_cell() == first
    assert directory.cell("us-1").created_at == NOW
    with pytest.raises(NotFound):
        directory.cell("nowhere")
    with pytest.raises(Conflict):
        directory.create_cell("eu-1", "us", "http://elsewhere", NOW)


def test_a_tenant_is_placed_once_and_never_moved_by_placing(directory: Directory) -> None:
    directory.create_cell("a", "eu", "http://a", NOW)
    directory.create_cell("b", "eu", "http://b", NOW)
    placed = directory.place(["ten_1", "ten_2", "ten_1"], "a", NOW)
    assert [one.tenant_id for one in placed.new] == ["ten_1", "ten_2"]
    again = directory.place(["ten_2", "ten_3"], "b", NOW)
    assert [one.tenant_id for one in again.new] == ["ten_3"]
    assert again.elsewhere == {"ten_2": "a"}
    assert directory.place(["ten_1"], "a", NOW).new == []  # there already: as it was
    home = directory.home_of("ten_2")
    assert home is not None
    assert home.cell.name == "a"
    assert directory.home_of("ten_unknown") is None
    assert directory.tenants_per_cell() == {"a": 2, "b": 1}


def test_a_directory_out_of_reach_is_temporarily_unavailable(tmp_path: Path) -> None:
    with pytest.raises(TemporarilyUnavailable):
        Directory(sqlite_url(tmp_path / "no-such-folder" / "directory.db"))


def test_a_move_is_begun_once_flipped_and_ended(directory: Directory) -> None:
    for name in ("a", "b", "c"):
        directory.create_cell(name, "eu", f"http://{name}", NOW)
    directory.place(["ten_1"], "a", NOW)
    directory.begin_move("ten_1", "a", "b", NOW)
    directory.begin_move("ten_1", "a", "b", NOW)  # the same move again: goes on
    with pytest.raises(Conflict, match="moving from cell a to cell b"):
        directory.begin_move("ten_1", "a", "c", NOW)
    home = directory.home_of("ten_1")
    assert home is not None
    assert (home.cell.name, home.moving_to, home.previous) == ("a", "b", [])
    later = NOW.replace(hour=13)
    directory.flip("ten_1", "a", "b", later)
    directory.flip("ten_1", "a", "b", later)  # flipped before: as it is
    with pytest.raises(Conflict):
        directory.flip("ten_1", "c", "a", later)  # it does not live in c
    assert directory.move_under_way("ten_1") == ("a", "b")
    directory.end_move("ten_1")
    home = directory.home_of("ten_1")
    assert home is not None
    assert (home.cell.name, home.moving_to) == ("b", None)
    assert [cell.name for cell in home.previous] == ["a"]
    assert directory.move_under_way("ten_1") is None
    # and back again: a is its home once more, b the previous one
    directory.begin_move("ten_1", "b", "a", later)
    directory.flip("ten_1", "b", "a", later.replace(hour=14))
    directory.end_move("ten_1")
    home = directory.home_of("ten_1")
    assert home is not None
    assert (home.cell.name, [cell.name for cell in home.previous]) == ("a", ["b"])
