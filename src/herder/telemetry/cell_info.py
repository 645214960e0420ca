"""The cell a process is one of (``HERDER_CELL``, ``HERDER_REGION``), as an info metric: a
constant 1 labelled by its names, so a query joins it to name a cell's series
(``* on(instance) group_left(cell, region) herder_cell_info``); none outside cells. Served by
a server's ``/metrics`` and by ``herder scheduler --metrics-port``."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from herder.settings import Settings


class CellInfo(Collector):
    def __init__(self, settings: Settings) -> None:
        self._cell, self._region = settings.cell, settings.region

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self._cell is None:
            return
        info = GaugeMetricFamily(
            "herder_cell_info", "The cell this server is one of, and its region (always 1)",
            labels=["cell", "region"],
        )  # fmt: skip
        info.add_metric([self._cell, self._region], 1)
        yield info
