"""The edge's metrics (``GET /metrics`` at the edge; docs/cells.md, "Seeing the cells"): the
requests it sent to each cell, by cell, region and status class; how long each cell took to
answer; its 503s naming a cell, by cell and why; and each cell's health and tenants, read
when scraped (``CellStatus``, as ``GET /v1/cells`` shows them).

A registry of its own, not prometheus-client's global one: a cell's metrics mean nothing in
the edge's process, and a test builds several edges in one process. Labels are cells,
regions, status classes and reasons — never a tenant, of which there are 100,000.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from herder.domain.cells import CellStatus
from herder.edge.forwarding import Forwarded

# No ``*_created`` series, as a cell's /metrics (telemetry/metrics.py): nothing reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]

MEDIA_TYPE = CONTENT_TYPE_LATEST
_ANSWERS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)  # seconds


class EdgeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._requests = Counter(
            "herder_edge_requests",
            "Requests the edge sent to a cell (or refused for a tenant moving), by the cell, "
            "its region and the status class answered",
            ["cell", "region", "status"], registry=self.registry,
        )  # fmt: skip
        self._answers = Histogram(
            "herder_edge_request_duration_seconds",
            "From a request's arrival to its cell's answer's head (the body streams after), "
            "by cell",
            ["cell"], buckets=_ANSWERS, registry=self.registry,
        )  # fmt: skip
        self._unavailable = Counter(
            "herder_edge_cell_unavailable",
            "The edge's 503s naming a cell, by cell and why (down: refused, silent or its "
            "own 503; moving: the tenant is moving or moved to another cell)",
            ["cell", "reason"], registry=self.registry,
        )  # fmt: skip
        ProcessCollector(registry=self.registry)

    def answered(self, forwarded: Forwarded, waited_seconds: float | None) -> None:
        """A request answered for ``forwarded.cell``; ``waited_seconds`` for its answer's
        head, None when it was never sent (a moving tenant's write)."""
        cell, status = forwarded.cell, forwarded.response.status_code
        self._requests.labels(cell.name, cell.region, f"{status // 100}xx").inc()
        if waited_seconds is not None:
            self._answers.labels(cell.name).observe(waited_seconds)
        if forwarded.unavailable is not None:
            self._unavailable.labels(cell.name, forwarded.unavailable.value).inc()

    def exposition(self, cells: Sequence[CellStatus]) -> bytes:
        """What a scrape reads: the counts kept, and ``cells`` as gauges."""
        scraped = CollectorRegistry(auto_describe=False)
        scraped.register(CellGauges(cells))
        return generate_latest(self.registry) + generate_latest(scraped)


class CellGauges(Collector):
    """Each cell's health and tenants, as a scrape found them."""

    def __init__(self, cells: Sequence[CellStatus]) -> None:
        self._cells = cells

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["cell", "region"]
        up = GaugeMetricFamily(
            "herder_edge_cell_up",
            "1 while the cell's /readyz answers 200 within 1 s, as the edge last asked",
            labels=labels,
        )
        tenants = GaugeMetricFamily(
            "herder_edge_cell_tenants", "Tenants the directory places in the cell", labels=labels
        )
        for cell in self._cells:
            up.add_metric([cell.name, cell.region], 1 if cell.up else 0)
            tenants.add_metric([cell.name, cell.region], cell.tenants)
        yield up
        yield tenants
