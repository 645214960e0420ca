"""The dashboard through a real ``herder edge`` (docs/dashboard.md, docs/cells.md): the header
names the signed-in tenant's cell and region; the Cells page shows every cell — its region,
health, tenants, which is the default — live, to the default cell's system admins only; a
tenant's admin is offered no such page and, opening it by its address, is told what it
needs. Served with no edge, the page says it is one cell, and the header names none.

The edge's directory is on SQLite, its one real cell the module's server (cell a, region
eu); cell b (region us) is registered at an address nothing answers: down."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest
from playwright.sync_api import Page, expect

from herder.client import HerderClient
from tests.system.conftest import Cluster, free_port, wait_healthy
from tests.system.dashboard.conftest import SignIn


@dataclass(frozen=True)
class Edge:
    url: str
    admin: str  # the default cell's system admin


@pytest.fixture(scope="module")
def edge(cluster: Cluster) -> Edge:
    """An edge in front of the module's server, stopped with it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = cluster.spawn(
        "edge", "--directory-url", f"sqlite:///{cluster.home / 'directory.db'}",
        "--port", str(port), "--default-cell-url", cluster.url, "--default-cell", "a",
        "--region", "eu",
    )  # fmt: skip
    wait_healthy(url, process)
    admin = cluster.credentials["api_key"]
    with HerderClient(url, admin) as through:
        through.adopt_tenants("a")
        through.create_cell("b", region="us", api_url=f"http://127.0.0.1:{free_port()}")
    return Edge(url, admin)


def nav(tab: Page) -> list[str]:
    return tab.locator("#nav a").all_inner_texts()


def test_the_cells_page_shows_every_cell_live_through_the_edge(sign_in: SignIn, edge: Edge) -> None:
    tab = sign_in(edge.admin, at=edge.url)
    expect(tab.locator("#cell")).to_have_text("cell a · region eu")
    tab.get_by_role("link", name="Cells").click()
    expect(tab.get_by_role("heading", name="Cells")).to_be_visible()
    a, b = tab.locator('tr[data-cell="a"]'), tab.locator('tr[data-cell="b"]')
    expect(a).to_contain_text("eu")
    expect(a.locator("[data-health]")).to_have_text("up")
    expect(a).to_contain_text("default")
    with httpx.Client(base_url=edge.url, timeout=10) as http:
        listed = http.get("/v1/cells", headers={"Authorization": f"Bearer {edge.admin}"})
    tenants = {cell["name"]: cell["tenants"] for cell in listed.json()["items"]}
    expect(a.locator("td").nth(3)).to_have_text(str(tenants["a"]))
    expect(b).to_contain_text("us")
    expect(b.locator("[data-health]")).to_have_text("down")
    expect(b.locator("td").nth(4)).to_have_text("")
    with HerderClient(edge.url, edge.admin) as through:  # a cell made while the page is open
        through.create_cell("c", region="us", api_url=f"http://127.0.0.1:{free_port()}")
    expect(tab.locator('tr[data-cell="c"]')).to_contain_text("us")


def test_a_tenants_admin_sees_its_cell_and_is_offered_no_cells_page(
    sign_in: SignIn, edge: Edge
) -> None:
    with HerderClient(edge.url, edge.admin) as through:
        tenant = through.create_tenant("acme")
        key = through.create_api_key(tenant.id, role="admin")
    tab = sign_in(key, at=edge.url)
    expect(tab.locator("#cell")).to_have_text("cell a · region eu")
    expect(tab.get_by_role("link", name="Runs", exact=True)).to_be_visible()
    assert "Cells" not in nav(tab)
    assert "Workers" not in nav(tab)
    tab.goto("/#/cells")
    expect(tab.get_by_text("The cells need a system admin key of the default cell")).to_be_visible()
    expect(tab.locator("tr[data-cell]")).to_have_count(0)


def test_with_no_edge_the_page_says_one_cell_and_the_header_names_none(
    page: Page,
) -> None:
    expect(page.get_by_role("link", name="Runs", exact=True)).to_be_visible()
    expect(page.locator("#cell")).to_be_hidden()
    page.get_by_role("link", name="Cells").click()
    expect(page.get_by_text("One cell, no edge")).to_be_visible()
    expect(page.locator(".banner")).to_be_empty()
