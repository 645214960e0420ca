"""The directory at the brief's size (issue 45): 100,000 tenants placed over 40 cells in 10
regions, in a PostgreSQL directory of their own. What the edge pays to route a request:

- on a warm cache, the real path (``edge.routing.destination``, then the edge's own caches:
  the tenant's home by cell name, and that cell from the cells kept once by name) holding
  every tenant's home, over requests spread across all of them;
- on a miss, one read of the directory (``Directory.residence_of``, in a thread as the edge
  reads it), for tenants picked at random;
- and the memory the warm cache of 100,000 homes holds, each filled as a request fills it
  (its tenant id parsed from a key: the cache keeps that string).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
import tracemalloc
from dataclasses import dataclass
from datetime import UTC, datetime

from bench.dispatch_store import postgres_database
from herder.directory.repository import Directory
from herder.edge.app import Edge
from herder.edge.routing import ToTenant, destination
from herder.edge.settings import EdgeSettings

DATABASE = "herder_bench_directory"
TENANTS = 100_000
REGIONS = 10
CELLS_PER_REGION = 4
MISSES = 2_000  # directory reads timed, one tenant each
WARM_REQUESTS = 200_000  # routed on the warm cache, each for a tenant drawn at random
PLACED_AT_ONCE = 5_000  # tenants placed a statement
SECRET = "x" * 43


@dataclass(frozen=True)
class DirectoryResult:
    tenants: int
    cells: int
    regions: int
    miss_p50_ms: float
    miss_p99_ms: float
    warm_us: float
    cache_mb: float

    def line(self) -> str:
        return (
            f"directory: {self.tenants} tenants in {self.cells} cells of {self.regions} regions; "
            f"routed on a warm cache in {self.warm_us:.1f} µs a request (goal ≤ 100 µs), "
            f"a miss reads the directory in {self.miss_p50_ms:.2f} ms p50, "
            f"{self.miss_p99_ms:.2f} ms p99; the warm cache holds {self.cache_mb:.0f} MB"
        )


def section(result: DirectoryResult, machine: str, when: datetime, command: str) -> list[str]:
    return [
        f"\n### The directory at the brief's size, {when:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `{command}`: a PostgreSQL directory (its own database) with "
        f"{result.tenants:,} tenants placed over {result.cells} cells in {result.regions} "
        f"regions. Warm: {WARM_REQUESTS:,} requests, each with the key of a tenant drawn at "
        "random, through the edge's routing (`edge.routing.destination`) and its caches "
        "(`Edge.homes`, each tenant's home by cell name, and `Edge.cell_named`, the cells "
        f"kept once) holding every home, in one event loop. Miss: {MISSES:,} tenants' homes "
        "read from the directory (`Directory.residence_of`), each in a thread as the edge "
        "reads it; no other load.\n",
        f"**{result.line()}**",
    ]


def measure() -> DirectoryResult:
    with postgres_database(DATABASE) as url:
        directory = Directory(url)
        try:
            tenants = _populate(directory)
            misses = asyncio.run(_misses(directory, random.sample(tenants, MISSES)))
            edge = Edge(EdgeSettings(directory_url=url, cache_seconds=3600), directory)
            warm_us, cache_mb = asyncio.run(_warm(edge, tenants))
        finally:
            directory.close()
    return DirectoryResult(
        tenants=len(tenants),
        cells=REGIONS * CELLS_PER_REGION,
        regions=REGIONS,
        miss_p50_ms=statistics.median(misses),
        miss_p99_ms=sorted(misses)[int(0.99 * (len(misses) - 1))],
        warm_us=warm_us,
        cache_mb=cache_mb,
    )


def _populate(directory: Directory) -> list[str]:
    """The cells, then the tenants dealt round them, a batch a statement."""
    now = datetime.now(UTC)
    names = []
    for region in range(REGIONS):
        for number in range(CELLS_PER_REGION):
            name = f"r{region}-c{number}"
            directory.create_cell(name, f"region-{region}", f"http://{name}.internal:8080", now)
            names.append(name)
    tenants = [f"ten_{n:026d}" for n in range(TENANTS)]
    for cell_index, name in enumerate(names):
        theirs = tenants[cell_index :: len(names)]
        for start in range(0, len(theirs), PLACED_AT_ONCE):
            directory.place(theirs[start : start + PLACED_AT_ONCE], name, now)
    return tenants


async def _misses(directory: Directory, tenants: list[str]) -> list[float]:
    timings = []
    for tenant in tenants:
        started = time.perf_counter()
        home = await asyncio.to_thread(directory.residence_of, tenant)
        timings.append((time.perf_counter() - started) * 1000)
        assert home is not None
    return timings


async def _warm(edge: Edge, tenants: list[str]) -> tuple[float, float]:
    """Every home read once (through the cache, as its misses would, each tenant id parsed
    from a key as a request's is), then the routing of requests spread over all of them;
    and what the cache's entries hold."""

    def key_of(tenant: str) -> str:
        return f"Bearer {tenant}.key_01M8H2D6Q0X3V1M9T7Y4B5K8ZP.{SECRET}"

    async def fill(tenant: str) -> None:
        routed = destination("GET", "/v1/jobs", key_of(tenant))
        assert isinstance(routed, ToTenant)
        home = await edge.homes.get(routed.tenant_id)
        assert home is not None
        await edge.cell_named(home.cell)

    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for start in range(0, len(tenants), 100):
        await asyncio.gather(*(fill(tenant) for tenant in tenants[start : start + 100]))
    held = tracemalloc.take_snapshot().compare_to(before, "filename")
    tracemalloc.stop()
    cache_mb = sum(stat.size_diff for stat in held) / 1e6
    keys = [key_of(tenant) for tenant in random.choices(tenants, k=WARM_REQUESTS)]
    started = time.perf_counter()
    for authorization in keys:
        routed = destination("POST", "/v1/jobs/job_01/runs", authorization)
        assert isinstance(routed, ToTenant)
        home = await edge.homes.get(routed.tenant_id)
        assert home is not None
        await edge.cell_named(home.cell)
    return (time.perf_counter() - started) / WARM_REQUESTS * 1e6, cache_mb
