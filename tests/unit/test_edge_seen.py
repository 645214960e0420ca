"""What the edge keeps and shows of the cells: its routing cache holds each tenant's home by
cell name, every cell's record once, so a tenant costs a few hundred bytes (the brief's
100,000 tenants, ten times over, fit its bound); its metrics name cells, regions, status
classes and reasons, never a tenant; and docs/cells.md describes each of them."""

from __future__ import annotations

import asyncio
import re
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

from herder.directory.repository import Directory
from herder.domain.cells import CellStatus, Residence
from herder.edge.app import Edge
from herder.edge.expiring import MAX_ENTRIES
from herder.edge.metrics import CellGauges, EdgeMetrics
from herder.edge.settings import EdgeSettings
from herder.settings import sqlite_url

ROOT = Path(__file__).resolve().parents[2]
TENANTS = 3_000
WARMING = 500  # read before measuring: the threads, statements and cells read once for all
BYTES_A_TENANT = 400  # a full Home each, as before, was about 1,930
SAMPLES_OF = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
MADE = datetime(2026, 12, 7, tzinfo=UTC)


def edge_families() -> dict[str, tuple[str, set[str]]]:
    """Every family the edge's /metrics serves (of its own): its type and its labels."""
    status = CellStatus(name="a", region="eu", api_url="http://a", is_default=True,
                        created_at=MADE, up=True, tenants=1)  # fmt: skip
    metrics = EdgeMetrics()
    families = [*metrics.registry.collect(), *CellGauges([status]).collect()]
    return {
        family.name: (family.type, {label for sample in family.samples for label in sample.labels})
        for family in families
        if family.name.startswith("herder_edge_")
    }


def test_the_edges_metrics_name_cells_never_tenants() -> None:
    families = edge_families()
    assert set(families) >= {
        "herder_edge_requests",
        "herder_edge_request_duration_seconds",
        "herder_edge_cell_unavailable",
        "herder_edge_cell_up",
        "herder_edge_cell_tenants",
    }
    for name, (_, labels) in families.items():
        assert labels <= {"cell", "region", "status", "reason", "le"}, (name, labels)


def test_the_cells_doc_describes_every_metric_of_the_edge_and_no_other() -> None:
    text = (ROOT / "docs/cells.md").read_text()
    described = set(re.findall(r"\bherder_edge_[a-z_]+", text))
    families = edge_families()
    served = {name + suffix for name, (kind, _) in families.items() for suffix in SAMPLES_OF[kind]}
    assert described <= served | set(families), described - served - set(families)
    exported = {
        name + ("_total" if kind == "counter" else "") for name, (kind, _) in families.items()
    }
    assert exported <= described, exported - described


def test_the_routing_cache_keeps_each_cell_once_and_little_per_tenant(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "directory.db")
    directory = Directory(url)
    try:
        for number in range(4):
            directory.create_cell(f"c{number}", "eu", f"http://c{number}.internal", MADE)
        tenants = [f"ten_{number:026d}" for number in range(TENANTS)]
        for number in range(4):
            directory.place(tenants[number::4], f"c{number}", MADE)
        edge = Edge(EdgeSettings(directory_url=url, cache_seconds=3600), directory)

        async def fill(begin: int, end: int) -> list[Residence | None]:
            homes: list[Residence | None] = []
            for start in range(begin, end, 100):
                # each tenant id a string of its own, as each request's key parsed gives one
                batch = [
                    tenant[:4] + tenant[4:] for tenant in tenants[start : min(end, start + 100)]
                ]
                homes += await asyncio.gather(*(edge.homes.get(tenant) for tenant in batch))
            await edge.cell_named("c0")
            return homes

        async def measured() -> tuple[list[Residence | None], int]:
            await fill(0, WARMING)
            tracemalloc.start()
            before = tracemalloc.take_snapshot()
            homes = await fill(WARMING, TENANTS)
            held = tracemalloc.take_snapshot().compare_to(before, "filename")
            tracemalloc.stop()
            return homes, sum(stat.size_diff for stat in held)

        homes, held = asyncio.run(measured())
    finally:
        directory.close()
    per_tenant = held / (TENANTS - WARMING)
    print(f"\nthe edge's routing cache: {per_tenant:.0f} bytes a tenant")
    assert per_tenant < BYTES_A_TENANT
    assert len({id(home.cell) for home in homes if home is not None}) == 4
    assert MAX_ENTRIES * BYTES_A_TENANT <= 400e6  # a full cache, for ten times the brief
    assert MAX_ENTRIES >= 10 * 100_000
