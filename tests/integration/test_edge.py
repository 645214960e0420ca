"""The edge in front of two real cells (each an API server over its own store, served over
HTTP): every tenant's request reaches its own cell, whichever key it comes with; a tenant the
directory lacks is 404, a forged tenant part 401, a cell down 503 naming it while the other
cell's tenants see nothing; cells and tenants are administered through it (docs/cells.md).
Cell A and the directory are on each store; cell B on SQLite."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from herder.api.app import create_app
from herder.cli import common
from herder.cli.common import app
from herder.client import HerderClient
from herder.directory.repository import Directory
from herder.edge.app import create_edge_app
from herder.edge.settings import EdgeSettings
from herder.keyring import Keyring
from herder.settings import Settings, sqlite_url
from herder.store.cold.blobs import DirectoryBlobStore
from herder.store.store import Store
from tests.conftest import fresh_postgres_url, fresh_sqlite_url
from tests.integration.served import Served, served
from tests.integration.test_hooks import SECRET, herder_headers

UNKNOWN_TENANT = "ten_01M8H1Z0C3R7Q2W5E9T4Y6V8XP"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@dataclass
class TwoCells:
    edge: TestClient
    directory: Directory
    a: Served
    b: Served
    a_admin: str  # cell A's system admin (A is the default cell)
    b_admin: str  # cell B's system admin
    a_store: Store
    b_store: Store  # with a secrets key of its own

    def tenant_in(self, cell: str, name: str) -> tuple[str, str]:
        """A tenant made through the edge in ``cell`` and an admin key of it."""
        admin = self.a_admin if cell == "default" else self.b_admin
        made = self.edge.post(
            f"/v1/cells/{cell}/tenants", headers=bearer(admin), json={"name": name}
        )
        assert made.status_code == 201, made.text
        tenant_id: str = made.json()["id"]
        key = self.edge.post(
            f"/v1/tenants/{tenant_id}/keys", headers=bearer(admin), json={"role": "admin"}
        )
        assert key.status_code == 201, key.text
        return tenant_id, str(key.json()["token"])


@pytest.fixture
def directory_url(
    database_url: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[str]:
    """The directory on the store cell A is on, in a database of its own."""
    if database_url.startswith("sqlite"):
        yield sqlite_url(tmp_path / "directory.db")
    else:
        yield from fresh_postgres_url(request.getfixturevalue("postgres_template"))


@pytest.fixture
def cells(
    store: Store, directory_url: str, sqlite_template: Path, tmp_path: Path
) -> Iterator[TwoCells]:
    (tmp_path / "b").mkdir()
    store_b = Store(
        fresh_sqlite_url(sqlite_template, tmp_path / "b"),
        keyring=Keyring.of([os.urandom(32)]),
        artifact_blobs=DirectoryBlobStore(tmp_path / "b" / "blobs"),
    )
    made_a, made_b = store.access.bootstrap(), store_b.access.bootstrap()
    assert made_a is not None
    assert made_b is not None
    app_a = create_app(store, Settings(home=tmp_path, database_url=store.database.url))
    app_b = create_app(store_b, Settings(home=tmp_path / "b", database_url=store_b.database.url))
    directory = Directory(directory_url)
    try:
        with served(app_a) as a, served(app_b) as b:
            settings = EdgeSettings(directory_url=directory_url, timeout_seconds=10)
            directory.create_cell("default", "eu", a.url, datetime.now(UTC))
            with TestClient(create_edge_app(settings, directory)) as edge:
                two = TwoCells(
                    edge, directory, a, b, made_a.admin_key, made_b.admin_key, store, store_b
                )
                for cell, admin in [("default", two.a_admin)]:
                    adopted = edge.post(f"/v1/cells/{cell}/adopt", headers=bearer(admin))
                    assert adopted.status_code == 200, adopted.text
                created = edge.post(
                    "/v1/cells", headers=bearer(two.a_admin),
                    json={"name": "b", "region": "us", "api_url": b.url},
                )  # fmt: skip
                assert created.status_code == 201, created.text
                adopted = edge.post("/v1/cells/b/adopt", headers=bearer(two.b_admin))
                assert adopted.status_code == 200, adopted.text
                yield two
    finally:
        directory.close()
        store_b.close()


def test_each_tenant_reaches_its_own_cell_and_sees_only_its_own(cells: TwoCells) -> None:
    tenant_a, key_a = cells.tenant_in("default", "alpha")
    tenant_b, key_b = cells.tenant_in("b", "beta")
    job = {"runtime": "shell", "command": "echo hi"}
    made_a = cells.edge.post("/v1/jobs", headers=bearer(key_a), json={"name": "a-job", **job})
    made_b = cells.edge.post("/v1/jobs", headers=bearer(key_b), json={"name": "b-job", **job})
    assert (made_a.status_code, made_b.status_code) == (201, 201)
    listed_a = cells.edge.get("/v1/jobs", headers=bearer(key_a)).json()["items"]
    listed_b = cells.edge.get("/v1/jobs", headers=bearer(key_b)).json()["items"]
    assert [job["name"] for job in listed_a] == ["a-job"]
    assert [job["name"] for job in listed_b] == ["b-job"]
    # B's job asked for with A's key: A's cell answers, and has no such job
    other = cells.edge.get(f"/v1/jobs/{made_b.json()['id']}", headers=bearer(key_a))
    assert other.status_code == 404
    current_b = cells.edge.get("/v1/keys/current", headers=bearer(key_b)).json()
    assert current_b["tenant_id"] == tenant_b
    assert cells.edge.get("/v1/keys/current", headers=bearer(key_a)).json()["tenant_id"] == tenant_a


def test_no_header_picks_a_cell(cells: TwoCells) -> None:
    _, key_a = cells.tenant_in("default", "alpha")
    _, key_b = cells.tenant_in("b", "beta")
    cells.edge.post(
        "/v1/jobs",
        headers=bearer(key_b),
        json={"name": "b-only", "runtime": "shell", "command": "true"},
    )
    for header in ["X-Herder-Cell", "X-Cell", "X-Forwarded-Host", "Forwarded", "Host"]:
        picked = cells.edge.get("/v1/jobs", headers={**bearer(key_a), header: "b"})
        assert picked.status_code == 200, (header, picked.text)
        assert picked.json()["items"] == [], header


def test_a_token_naming_another_tenant_or_a_forged_one_is_refused(cells: TwoCells) -> None:
    tenant_a, key_a = cells.tenant_in("default", "alpha")
    tenant_b, _ = cells.tenant_in("b", "beta")
    _, key_id, secret = key_a.split(".")
    for token, status in [
        (f"{tenant_b}.{key_id}.{secret}", 401),  # routed to B, which has no such key
        (f"{cells.a_admin.split('.')[0]}.{key_id}.{secret}", 401),  # A's: not the key's tenant
        (f"{UNKNOWN_TENANT}.{key_id}.{secret}", 404),  # a tenant no cell has
        (f"../{tenant_a}.{key_id}.{secret}", 401),  # no tenant id's shape
        (f"{tenant_a}.{key_id}.{secret}x", 401),
    ]:
        answer = cells.edge.get("/v1/jobs", headers=bearer(token))
        assert answer.status_code == status, (token, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
    assert cells.edge.get("/v1/jobs", headers=bearer(key_a)).status_code == 200


def test_a_key_made_before_cells_goes_to_the_default_cell(cells: TwoCells) -> None:
    _, key_a = cells.tenant_in("default", "alpha")
    _, key_b = cells.tenant_in("b", "beta")
    assert cells.edge.get("/v1/jobs", headers=bearer(key_a.partition(".")[2])).status_code == 200
    assert cells.edge.get("/v1/jobs", headers=bearer(key_b.partition(".")[2])).status_code == 401


def test_a_cell_down_is_a_503_naming_it_and_the_other_cell_goes_on(cells: TwoCells) -> None:
    _, key_a = cells.tenant_in("default", "alpha")
    _, key_b = cells.tenant_in("b", "beta")
    cells.b.stop()
    down = cells.edge.get("/v1/jobs", headers=bearer(key_b))
    assert down.status_code == 503
    assert down.headers["Retry-After"] == "1"
    assert down.json()["cell"] == "b"
    assert "cell b is unavailable" in down.json()["detail"]
    assert cells.edge.get("/v1/jobs", headers=bearer(key_a)).status_code == 200
    listed = cells.edge.get("/v1/cells", headers=bearer(cells.a_admin)).json()["items"]
    assert {cell["name"]: cell["up"] for cell in listed} == {"default": True, "b": False}


def test_cells_are_listed_and_made_by_the_default_cells_system_admins_only(cells: TwoCells) -> None:
    _, key_a = cells.tenant_in("default", "alpha")
    listed = cells.edge.get("/v1/cells", headers=bearer(cells.a_admin))
    assert listed.status_code == 200
    shown = [
        (cell["name"], cell["region"], cell["is_default"], cell["up"], cell["tenants"])
        for cell in listed.json()["items"]
    ]
    assert shown == [("b", "us", False, True, 1), ("default", "eu", True, True, 2)]
    assert cells.edge.get("/v1/cells", headers=bearer(key_a)).status_code == 403
    # B's admin key: its tenant lives in b, and the edge shows it to no other cell
    assert cells.edge.get("/v1/cells", headers=bearer(cells.b_admin)).status_code == 403
    assert cells.edge.get("/v1/cells").status_code == 401
    body = {"name": "c", "region": "us", "api_url": "http://127.0.0.1:9"}
    assert cells.edge.post("/v1/cells", headers=bearer(key_a), json=body).status_code == 403
    for bad in [{"name": "C/../x"}, {"api_url": "file:///etc/passwd"}, {"region": ""}]:
        refused = cells.edge.post("/v1/cells", headers=bearer(cells.a_admin), json={**body, **bad})
        assert refused.status_code == 422, (bad, refused.text)
    twice = cells.edge.post("/v1/cells", headers=bearer(cells.a_admin), json={**body, "name": "b"})
    assert twice.status_code == 409


def test_a_tenant_not_made_by_its_cell_is_not_placed(cells: TwoCells) -> None:
    before = cells.directory.tenants_per_cell()
    # A's admin key is never shown to B (403); B's refusals are passed on; nothing is placed
    refused = cells.edge.post(
        "/v1/cells/b/tenants", headers=bearer(cells.a_admin), json={"name": "x"}
    )
    assert refused.status_code == 403
    assert "lives in cell default" in refused.json()["detail"]
    unknown = f"{UNKNOWN_TENANT}.key_01.secret"  # placed nowhere: b alone knows it is not its
    assert (
        cells.edge.post(
            "/v1/cells/b/tenants", headers=bearer(unknown), json={"name": "x"}
        ).status_code
        == 401
    )
    invalid = cells.edge.post(
        "/v1/cells/b/tenants", headers=bearer(cells.b_admin), json={"name": ""}
    )
    assert invalid.status_code == 422
    assert (
        cells.edge.post(
            "/v1/cells/nowhere/tenants", headers=bearer(cells.b_admin), json={"name": "x"}
        ).status_code
        == 404
    )
    cells.b.stop()
    down = cells.edge.post("/v1/cells/b/tenants", headers=bearer(cells.b_admin), json={"name": "x"})
    assert (down.status_code, down.json()["cell"]) == (503, "b")
    assert cells.directory.tenants_per_cell() == before


def test_a_tenant_made_at_the_default_cell_is_placed_and_reachable_at_once(cells: TwoCells) -> None:
    unknown = cells.edge.get("/v1/jobs", headers=bearer(f"{UNKNOWN_TENANT}.key_1.s"))
    assert unknown.status_code == 404
    made = cells.edge.post("/v1/tenants", headers=bearer(cells.a_admin), json={"name": "gamma"})
    assert made.status_code == 201, made.text
    home = cells.directory.home_of(made.json()["id"])
    assert home is not None
    assert home.cell.name == "default"
    listed = cells.edge.get("/v1/tenants", headers=bearer(cells.a_admin))  # forwarded
    assert made.json()["id"] in [tenant["id"] for tenant in listed.json()["items"]]


def test_an_inbound_hook_reaches_its_tenants_cell_without_a_key(cells: TwoCells) -> None:
    tenant_a, _ = cells.tenant_in("default", "alpha")
    tenant_b, key_b = cells.tenant_in("b", "beta")
    made = cells.edge.post("/v1/hooks", headers=bearer(key_b), json={"name": "h", "secret": SECRET})
    assert made.status_code == 201, made.text
    hook = made.json()
    assert hook["url"] == f"/v1/hooks/{tenant_b}.{hook['id']}"
    body = b'{"ref": "main"}'
    delivered = cells.edge.post(hook["url"], content=body, headers=herder_headers(body, "d-1"))
    assert delivered.status_code == 201, delivered.text
    # the same hook's id under another tenant: A's cell, which has no such hook
    elsewhere = f"/v1/hooks/{tenant_a}.{hook['id']}"
    assert (
        cells.edge.post(elsewhere, content=body, headers=herder_headers(body, "d-2")).status_code
        == 404
    )
    unknown = f"/v1/hooks/{UNKNOWN_TENANT}.{hook['id']}"
    assert (
        cells.edge.post(unknown, content=body, headers=herder_headers(body, "d-3")).status_code
        == 404
    )


def test_an_oversize_body_gets_the_cells_413(cells: TwoCells) -> None:
    _, key_b = cells.tenant_in("b", "beta")
    big = b'{"name": "' + b"x" * (5 * 1024 * 1024) + b'"}'
    answer = cells.edge.post(
        "/v1/jobs", headers={**bearer(key_b), "Content-Type": "application/json"}, content=big
    )
    assert answer.status_code == 413, answer.text[:200]
    assert answer.headers["content-type"] == "application/problem+json"


def test_the_edge_answers_its_health_itself(cells: TwoCells) -> None:
    assert cells.edge.get("/healthz").json() == {"status": "ok"}
    assert cells.edge.get("/readyz").status_code == 200


def test_the_cli_makes_and_lists_cells_and_tenants_in_them_through_the_edge(
    cells: TwoCells, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HERDER_HOME", str(tmp_path))
    monkeypatch.setenv("HERDER_URL", "http://testserver")
    monkeypatch.setattr(common.out, "width", 250)

    def herder(*args: str, key: str) -> str:
        monkeypatch.setenv("HERDER_API_KEY", key)

        def connect(url: str, api_key: str, **options: Any) -> HerderClient:
            return HerderClient(url, api_key, http=cells.edge, **options)

        monkeypatch.setattr(common, "HerderClient", connect)
        result = CliRunner().invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    made = herder(
        "cell", "create", "c", "--region", "us", "--api-url", cells.b.url, key=cells.a_admin
    )
    assert "created cell c in region us" in made
    listed = herder("cell", "list", key=cells.a_admin)
    assert "default (default)" in listed
    assert "up" in listed
    quiet = herder("tenant", "create", "delta", "--cell", "b", "-q", key=cells.b_admin).strip()
    home = cells.directory.home_of(quiet)
    assert home is not None
    assert home.cell.name == "b"
    adopted = herder("cell", "adopt", "b", "--json", key=cells.b_admin)
    assert '"placed": []' in adopted
