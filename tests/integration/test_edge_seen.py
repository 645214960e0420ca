"""The cells seen through the edge (docs/cells.md, "Seeing the cells"): every answer names
the cell it is from or about (``Herder-Cell``, ``Herder-Region``), whatever a client sent;
the edge's ``/metrics`` counts requests by cell and status class and its 503s by cell and
why, shows each cell's health and tenants, names no tenant, and is for the default cell's
system admins only. Cell A (the default, region eu) and the directory are on each store;
cell B (region us) on SQLite."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import httpx

from tests.integration.test_edge import TwoCells, bearer, cells, directory_url

__all__ = ["cells", "directory_url"]  # the fixtures, shared with test_edge

JOB = {"runtime": "shell", "command": "true"}


def named(answer: httpx.Response) -> tuple[str | None, str | None]:
    """The cell and region an answer names (once each)."""
    headers = answer.headers
    assert len(headers.get_list("herder-cell")) <= 1, headers
    assert len(headers.get_list("herder-region")) <= 1, headers
    return headers.get("herder-cell"), headers.get("herder-region")


def scraped(cells: TwoCells) -> str:
    answer = cells.edge.get("/metrics", headers=bearer(cells.a_admin))
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    text: str = answer.text
    return text


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` with exactly ``labels``, if served."""
    wanted = ",".join(f'{label}="{value}"' for label, value in sorted(labels.items()))
    for line in text.splitlines():
        metric, _, value = line.rpartition(" ")
        if not metric.startswith(name + "{"):
            continue
        if ",".join(sorted(metric[len(name) + 1 : -1].split(","))) == wanted:
            return float(value)
    return None


def test_each_answer_names_its_tenants_cell_and_region(cells: TwoCells) -> None:
    _, key_a = cells.tenant_in("default", "alpha")
    _, key_b = cells.tenant_in("b", "beta")
    assert named(cells.edge.get("/v1/keys/current", headers=bearer(key_a))) == ("default", "eu")
    assert named(cells.edge.get("/v1/keys/current", headers=bearer(key_b))) == ("b", "us")
    refused = cells.edge.get("/v1/jobs/job_01NOSUCH", headers=bearer(key_b))
    assert refused.status_code == 404
    assert named(refused) == ("b", "us")  # the cell's own refusal is named too
    assert named(cells.edge.get("/")) == ("default", "eu")  # no key: the default cell's page


def test_a_header_a_client_sends_names_nothing_and_picks_nothing(cells: TwoCells) -> None:
    _, key_b = cells.tenant_in("b", "beta")
    forged = {**bearer(key_b), "Herder-Cell": "default", "Herder-Region": "eu"}
    made = cells.edge.post("/v1/jobs", headers=forged, json={"name": "b-job", **JOB})
    assert made.status_code == 201, made.text
    assert named(made) == ("b", "us")
    listed = cells.edge.get("/v1/jobs", headers=forged)
    assert [job["name"] for job in listed.json()["items"]] == ["b-job"]
    assert named(listed) == ("b", "us")


def test_a_cell_down_and_a_tenant_moving_are_named_and_counted(cells: TwoCells) -> None:
    tenant_b, key_b = cells.tenant_in("b", "beta")
    cells.directory.begin_move(tenant_b, "b", "default", datetime.now(UTC))
    moving = cells.edge.post("/v1/jobs", headers=bearer(key_b), json={"name": "x", **JOB})
    assert moving.status_code == 503, moving.text
    assert moving.json()["cell"] == "default"  # where it goes
    assert named(moving) == ("b", "us")  # where it lives until it has moved
    cells.b.stop()
    down = cells.edge.get("/v1/jobs", headers=bearer(key_b))
    assert (down.status_code, down.json()["cell"]) == (503, "b")
    assert named(down) == ("b", "us")
    text = scraped(cells)
    assert sample(text, "herder_edge_cell_unavailable_total", cell="b", reason="moving") == 1
    assert sample(text, "herder_edge_cell_unavailable_total", cell="b", reason="down") == 1
    assert sample(text, "herder_edge_requests_total", cell="b", region="us", status="5xx") == 2
    assert sample(text, "herder_edge_cell_up", cell="b", region="us") == 0
    assert sample(text, "herder_edge_cell_up", cell="default", region="eu") == 1


def test_the_edges_metrics_count_by_cell_and_name_no_tenant(cells: TwoCells) -> None:
    tenant_a, key_a = cells.tenant_in("default", "alpha")
    tenant_b, key_b = cells.tenant_in("b", "beta")
    b_ok = {"cell": "b", "region": "us", "status": "2xx"}
    before = sample(scraped(cells), "herder_edge_requests_total", **b_ok) or 0
    for _ in range(3):
        assert cells.edge.get("/v1/jobs", headers=bearer(key_b)).status_code == 200
    assert cells.edge.get("/v1/jobs/job_01NOSUCH", headers=bearer(key_a)).status_code == 404
    text = scraped(cells)
    assert sample(text, "herder_edge_requests_total", **b_ok) == before + 3
    assert sample(text, "herder_edge_requests_total", cell="default", region="eu", status="4xx")
    assert sample(text, "herder_edge_request_duration_seconds_count", cell="b") == before + 3
    assert sample(text, "herder_edge_cell_tenants", cell="b", region="us") == 2  # its system's
    assert sample(text, "herder_edge_cell_up", cell="b", region="us") == 1
    for tenant in (tenant_a, tenant_b):
        assert tenant not in text
    assert not re.search(r"ten_[0-9A-Z]", text)
    assert "_created" not in text


def test_only_the_default_cells_system_admins_may_scrape_the_edge(cells: TwoCells) -> None:
    _, key_a = cells.tenant_in("default", "alpha")
    assert cells.edge.get("/metrics").status_code == 401
    assert cells.edge.get("/metrics", headers=bearer(key_a)).status_code == 403
    # B's system admin: its key is never shown to the default cell
    refused = cells.edge.get("/metrics", headers=bearer(cells.b_admin))
    assert refused.status_code == 403
    assert "lives in cell b" in refused.json()["detail"]
    assert "herder_edge" not in refused.text
