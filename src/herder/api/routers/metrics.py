"""/metrics: Prometheus's text format, for a system admin's key (a scrape config's bearer
token). The state of the queue and the fleet is read from the database at each scrape
(``store.gauges``), so every API process and replica answers alike; what was counted as it
happened (``telemetry.metrics``) is this process's, or with several API processes all of
theirs added up (``telemetry.multiprocess``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from herder.api.auth import StoreDep, SystemAdmin
from herder.app.metrics import TOP_KEYS, Gauges, LimitGauges, gauges
from herder.telemetry.cell_info import CellInfo
from herder.telemetry.multiprocess import registry

router = APIRouter(tags=["metrics"])

Labels = TypeVar("Labels", bound=tuple[str, ...])


class Snapshot(Collector):
    """One scrape's gauges, as metric families."""

    def __init__(self, gauges: Gauges) -> None:
        self._gauges = gauges

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = self._gauges
        yield _labelled(
            "herder_runs_queued", "Runs waiting to be placed, by why they wait",
            ["tenant", "priority", "waiting"], g.queued,
        )  # fmt: skip
        yield _family("herder_runs", "Runs not yet ended, by state", "state", g.runs)
        yield _family("herder_runs_dead", "Runs in the dead-letter set", "tenant", g.dead)
        yield _family("herder_workers", "Workers by state", "state", g.workers)
        yield _family(
            "herder_fleet_capacity", "Offered by alive and draining workers", "resource",
            g.capacity,
        )  # fmt: skip
        yield _family("herder_fleet_used", "Taken by running attempts", "resource", g.used)
        free = {name: g.capacity[name] - g.used.get(name, 0.0) for name in g.capacity}
        yield _family("herder_fleet_free", "Offered and not taken", "resource", free)
        yield _family(
            "herder_workflow_runs", "Workflow runs not yet ended, by state", "state",
            g.workflow_runs,
        )  # fmt: skip
        yield _family(
            "herder_pool_desired_workers",
            "Workers an autoscaled pool should have now (running + queued + forecast within "
            "the lead time, within min and max): a target for KEDA or an HPA", "pool",
            g.desired_workers,
        )  # fmt: skip
        yield _labelled(
            "herder_forecast_runs_starting",
            "Runs the schedules will start in the next window, by pool (shared: no pool)",
            ["pool", "within"],
            g.forecast_starting,
        )
        yield _labelled(
            "herder_forecast_busy",
            "The most the schedules' runs keep busy at once in the next window, by pool",
            ["pool", "resource", "within"],
            g.forecast_busy,
        )
        yield from _budget_families(g.budgets)
        yield from _limit_families(g.limits)


def _limit_families(limits: LimitGauges) -> Iterator[GaugeMetricFamily]:
    yield _labelled(
        "herder_limit_runs", "Runs counted against a limit, running or waiting (queued)",
        ["tenant", "limit", "state"], limits.runs,
    )  # fmt: skip
    yield _labelled(
        "herder_limit_key_runs",
        f"As herder_limit_runs, for each limit's {TOP_KEYS} busiest keys only",
        ["tenant", "limit", "key", "state"],
        limits.key_runs,
    )


def _budget_families(
    budgets: dict[tuple[str, str, str, str], tuple[float, float]],
) -> Iterator[GaugeMetricFamily]:
    labels = ["tenant", "period", "pool", "resource"]
    used = GaugeMetricFamily(
        "herder_budget_used_seconds", "CPU- or GPU-seconds used in the budget's period so far",
        labels=labels,
    )  # fmt: skip
    limit = GaugeMetricFamily(
        "herder_budget_limit_seconds", "A budget's CPU- or GPU-seconds per period", labels=labels
    )
    for key, (spent, allowed) in sorted(budgets.items()):
        used.add_metric(list(key), spent)
        limit.add_metric(list(key), allowed)
    yield used
    yield limit


def _family(
    name: str, documentation: str, label: str, values: dict[str, int] | dict[str, float]
) -> GaugeMetricFamily:
    return _labelled(name, documentation, [label], {(key,): value for key, value in values.items()})


def _labelled(
    name: str, documentation: str, labels: list[str], values: Mapping[Labels, float]
) -> GaugeMetricFamily:
    """A gauge with a sample per key of ``values`` (its label values, in ``labels``' order),
    in key order."""
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key), value)
    return family


@router.get("/metrics", include_in_schema=False)
async def metrics(_: SystemAdmin, store: StoreDep, request: Request) -> Response:
    snapshot = CollectorRegistry(auto_describe=False)
    snapshot.register(Snapshot(await run_in_threadpool(gauges, store)))
    snapshot.register(CellInfo(request.app.state.settings))
    counted = await run_in_threadpool(generate_latest, registry())
    return Response(counted + generate_latest(snapshot), media_type=CONTENT_TYPE_LATEST)
