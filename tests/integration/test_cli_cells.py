"""The CLI through a real edge (docs/cells.md, "Setting it up"): ``herder tenant create
--region`` places a tenant in the region's cell that is up with the fewest tenants, with the
key of that cell the user gave and no other; a region unknown, with no cell up, or whose
chosen cell has no key given, is refused before anything is made; ``tenant show`` and
``tenant list`` name the cell and region that answered, and nothing without an edge.

Cells as test_edge makes them (default in eu, b in us), and a third, c, in us too."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from herder.api.app import create_app
from herder.cli import common
from herder.cli.common import app
from herder.client import HerderClient
from herder.keyring import Keyring
from herder.settings import Settings
from herder.store.cold.blobs import DirectoryBlobStore
from herder.store.store import Store
from tests.conftest import fresh_sqlite_url
from tests.integration.conftest import Herder
from tests.integration.served import Served, served
from tests.integration.test_edge import TwoCells, bearer, cells, directory_url

__all__ = ["cells", "directory_url"]  # the fixtures, shared with test_edge

Cli = Callable[..., Result]


@dataclass
class ThreeCells:
    two: TwoCells
    c: Served
    c_admin: str  # cell C's system admin

    def home_of(self, tenant_id: str) -> str:
        home = self.two.directory.home_of(tenant_id)
        assert home is not None
        return home.cell.name


@pytest.fixture
def three(cells: TwoCells, sqlite_template: Path, tmp_path: Path) -> Iterator[ThreeCells]:
    """Cell C (its own SQLite store, served over HTTP) registered in region us beside B,
    its own system tenant not adopted: the directory places no tenant in it yet."""
    (tmp_path / "c").mkdir()
    store_c = Store(
        fresh_sqlite_url(sqlite_template, tmp_path / "c"),
        keyring=Keyring.of([os.urandom(32)]),
        artifact_blobs=DirectoryBlobStore(tmp_path / "c" / "blobs"),
    )
    made = store_c.access.bootstrap()
    assert made is not None
    app_c = create_app(store_c, Settings(home=tmp_path / "c", database_url=store_c.database.url))
    try:
        with served(app_c) as c:
            created = cells.edge.post(
                "/v1/cells", headers=bearer(cells.a_admin),
                json={"name": "c", "region": "us", "api_url": c.url},
            )  # fmt: skip
            assert created.status_code == 201, created.text
            yield ThreeCells(cells, c, made.admin_key)
    finally:
        store_c.close()


@pytest.fixture
def herder_at_edge(three: ThreeCells, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    """``herder ARGS…`` through the edge, with the default cell's system admin key (or
    ``key``)."""
    monkeypatch.setenv("HERDER_HOME", str(tmp_path))
    monkeypatch.setenv("HERDER_URL", "http://testserver")
    monkeypatch.setattr(common.out, "width", 250)
    monkeypatch.setattr(common.err, "width", 250)

    def run(*args: str, key: str | None = None) -> Result:
        monkeypatch.setenv("HERDER_API_KEY", key or three.two.a_admin)

        def connect(url: str, api_key: str, **options: Any) -> HerderClient:
            return HerderClient(url, api_key, http=three.two.edge, **options)

        monkeypatch.setattr(common, "HerderClient", connect)
        return CliRunner().invoke(app, list(args))

    return run


def key_files(three: ThreeCells, tmp_path: Path) -> list[str]:
    """``--cell-key-file`` for B and C, each file holding that cell's system admin key."""
    options = []
    for cell, key in [("b", three.two.b_admin), ("c", three.c_admin)]:
        (tmp_path / f"{cell}.key").write_text(f"{key}\n")
        options += ["--cell-key-file", f"{cell}={tmp_path / f'{cell}.key'}"]
    return options


def made(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output.strip()


def test_a_tenant_made_by_region_lives_in_its_cell_up_with_the_fewest_tenants(
    three: ThreeCells, herder_at_edge: Cli, tmp_path: Path
) -> None:
    keys = key_files(three, tmp_path)
    # us: b has its system tenant, c none placed; then one each, and a tie goes to b
    first = made(herder_at_edge("tenant", "create", "delta", "--region", "us", *keys, "-q"))
    second = made(herder_at_edge("tenant", "create", "echo", "--region", "us", *keys, "-q"))
    third = made(herder_at_edge("tenant", "create", "foxtrot", "--region", "us", *keys))
    assert (three.home_of(first), three.home_of(second)) == ("c", "b")
    assert "created tenant foxtrot" in third
    assert third.endswith("in cell c, region us")
    # eu has the default cell alone, made with HERDER_API_KEY; B and C took their own keys
    # (the edge sends neither the default cell's key)
    fourth = made(herder_at_edge("tenant", "create", "golf", "--region", "eu", "-q"))
    assert three.home_of(fourth) == "default"


def test_a_region_with_no_cell_to_take_the_tenant_or_no_key_for_it_is_refused(
    three: ThreeCells, herder_at_edge: Cli, tmp_path: Path
) -> None:
    before = three.two.directory.tenants_per_cell()
    b_key = key_files(three, tmp_path)[:2]
    for args, says in [
        (["--region", "asia"], "no cell is in region 'asia'; regions: eu, us"),
        (["--region", "us", *b_key], "cell c of region us is chosen"),
        (["--region", "us", "--cell", "b"], "--cell and --region: choose one"),
        (["--region", "us", "--cell-key-file", f"c={tmp_path / 'none.key'}"], "none.key"),
    ]:
        refused = herder_at_edge("tenant", "create", "hotel", *args)
        assert refused.exit_code == 1, (args, refused.output)
        assert says in refused.output, (args, refused.output)
    three.two.b.stop()
    three.c.stop()
    keys = key_files(three, tmp_path)
    down = herder_at_edge("tenant", "create", "hotel", "--region", "us", *keys)
    assert down.exit_code == 1
    assert "no cell of region us is up (down: b, c)" in down.output
    assert three.two.directory.tenants_per_cell() == before


def test_tenant_show_and_list_name_the_cell_and_region_that_answered(
    three: ThreeCells, herder_at_edge: Cli, tmp_path: Path
) -> None:
    tenant = made(
        herder_at_edge("tenant", "create", "juliet", "--cell", "b", *key_files(three, tmp_path)[:2])
    )
    assert "in cell b" in tenant
    shown = made(herder_at_edge("tenant", "show", "juliet", key=three.two.b_admin)).splitlines()
    assert shown[-2:] == ["cell: b", "region: us"]
    listed = made(herder_at_edge("tenant", "list", key=three.two.b_admin))
    assert "juliet" in listed
    assert listed.endswith("tenants in cell b, region us")
    quiet = made(herder_at_edge("tenant", "list", "-q", key=three.two.b_admin))
    assert "cell" not in quiet


def test_without_an_edge_no_cell_is_named(herder: Herder) -> None:
    made(herder("tenant", "create", "kilo"))
    shown = made(herder("tenant", "show", "kilo"))
    assert "region" not in shown
    assert "cell" not in made(herder("tenant", "list"))
