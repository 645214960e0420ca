"""The alerting rules, the Grafana dashboard and docs/metrics.md name only metrics that
/metrics serves, and the dashboard and the docs show every one: they cannot drift apart."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import REGISTRY

from herder.api.routers.metrics import Snapshot
from herder.settings import Settings
from herder.store.gauges import Gauges
from herder.telemetry import metrics  # noqa: F401 (its metrics are registered on import)
from herder.telemetry.cell_info import CellInfo

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bherder_[a-z0-9_]+")
SAMPLES_OF = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gauge": ("",),
}


def families() -> dict[str, str]:
    """Every herder metric family served, by name: its type."""
    empty = Gauges(queued={}, runs={}, dead={}, workers={}, capacity={}, used={},
                   workflow_runs={}, desired_workers={}, forecast_starting={},
                   forecast_busy={})  # fmt: skip
    in_a_cell = Settings(home=Path("."), database_url="sqlite://", cell="a")
    found = [*REGISTRY.collect(), *Snapshot(empty).collect(), *CellInfo(in_a_cell).collect()]
    return {family.name: family.type for family in found if family.name.startswith("herder_")}


def served() -> set[str]:
    """Every sample name /metrics can serve."""
    return {name + suffix for name, kind in families().items() for suffix in SAMPLES_OF[kind]}


def alert_expressions() -> Iterator[str]:
    rules = yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert {"alert", "expr", "labels", "annotations"} <= set(rule), rule
            yield rule["expr"]


def dashboard_expressions() -> Iterator[str]:
    dashboard: dict[str, Any] = json.loads((ROOT / "deploy/grafana/herder.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield target["expr"]


def test_the_alerting_rules_name_only_served_metrics() -> None:
    expressions = list(alert_expressions())
    assert len(expressions) >= 8
    named = {name for expression in expressions for name in NAME.findall(expression)}
    assert named <= served(), named - served()


def test_the_dashboard_names_only_served_metrics_and_shows_each() -> None:
    named = {name for expression in dashboard_expressions() for name in NAME.findall(expression)}
    assert named <= served(), named - served()
    shown = {family for family in families() if any(n.startswith(family) for n in named)}
    assert shown == set(families()), set(families()) - shown


def test_the_docs_describe_every_metric() -> None:
    text = (ROOT / "docs/metrics.md").read_text()
    described = set(NAME.findall(text))
    assert described <= served() | set(families()), described - served() - set(families())
    exported = {name + ("_total" if kind == "counter" else "") for name, kind in families().items()}
    assert exported <= described, exported - described
