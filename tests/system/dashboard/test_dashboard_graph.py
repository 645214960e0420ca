"""The workflow graph in a real browser, checked by its geometry: edges go around the boxes
they do not join and end in arrowheads, each state has its own colour and a legend, and a run
that succeeded with failures handled inside it says so."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from herder.client import HerderClient
from tests.system.conftest import Cluster

pytestmark = pytest.mark.system

ENDED_WITHIN_MS = 60_000

# prepare → features → train, and prepare → train beside them: drawn in rows, that edge ran
# behind features. features fails; train, needing it, is upstream_failed; report (all_done)
# handles both, so the run succeeds by the leaf rule.
TASKS: list[dict[str, Any]] = [
    {"name": "prepare", "job": "passes"},
    {"name": "features", "job": "fails", "depends_on": ["prepare"]},
    {"name": "lint", "job": "passes", "depends_on": ["prepare"]},
    {"name": "train", "job": "passes", "depends_on": ["prepare", "features"]},
    {"name": "report", "job": "passes", "depends_on": ["train"], "trigger_rule": "all_done"},
]

# Every edge's points, sampled along its path every pixel, and the boxes it passes inside
# (a pixel's grace at their edges), in the page's pixels.
EDGE_GEOMETRY = """() => {
  const boxes = [...document.querySelectorAll("svg.dag g.task")].map((task) => ({
    name: task.dataset.task, at: task.querySelector("rect").getBoundingClientRect(),
  }));
  const inside = (point, at) => point.x > at.left + 1 && point.x < at.right - 1
    && point.y > at.top + 1 && point.y < at.bottom - 1;
  return [...document.querySelectorAll("svg.dag path.edge")].map((edge) => {
    const toScreen = edge.getScreenCTM();
    const passed = new Set();
    for (let along = 0; along <= edge.getTotalLength(); along += 1) {
      const point = edge.getPointAtLength(along).matrixTransform(toScreen);
      for (const box of boxes) if (inside(point, box.at)) passed.add(box.name);
    }
    const marker = (edge.getAttribute("marker-end") || "").match(/^url\\(#(.+)\\)$/);
    return {
      from: edge.dataset.from, to: edge.dataset.to, passed: [...passed].sort(),
      arrowhead: Boolean(marker && document.getElementById(marker[1])?.tagName === "marker"),
    };
  });
}"""

COLOURS = """() => Object.fromEntries([...document.querySelectorAll("svg.dag g.task")].map(
  (task) => [task.dataset.task, getComputedStyle(task.querySelector("rect")).fill]))"""

LEGEND_COLOURS = """() => Object.fromEntries([...document.querySelectorAll(".dag-legend li")].map(
  (item) => [item.dataset.state, getComputedStyle(item.querySelector("rect")).fill]))"""


# Edges skipping one to four layers, into a task with eight upstream tasks.
TANGLE: list[dict[str, Any]] = [
    {"name": name, "job": "passes", "depends_on": ups}
    for name, ups in [
        ("a", []), ("b", ["a"]), ("c", ["b"]), ("d", ["c"]), ("e", ["a", "d"]),
        ("f", ["b", "e"]), ("g", ["a"]), ("h", ["g", "c"]),
        ("i", ["a", "b", "c", "d", "e", "f", "g", "h"]),
    ]
]  # fmt: skip


@pytest.fixture(scope="module")
def http(herder: HerderClient, cluster: Cluster) -> Iterator[httpx.Client]:
    """The API as the admin, with the jobs the workflows run."""
    herder.create_job("passes", {"runtime": "shell", "command": "true"})
    herder.create_job("fails", {"runtime": "shell", "command": "exit 1"})
    key = {"Authorization": f"Bearer {cluster.credentials['api_key']}"}
    with httpx.Client(base_url=cluster.url, headers=key) as client:
        yield client


def created(http: httpx.Client, name: str, tasks: list[dict[str, Any]]) -> str:
    response = http.post("/v1/workflows", json={"name": name, "tasks": tasks})
    assert response.status_code == 201, response.text
    workflow_id: str = response.json()["id"]
    return workflow_id


@pytest.fixture(scope="module")
def handled_run(http: httpx.Client) -> dict[str, Any]:
    started = http.post(f"/v1/workflows/{created(http, 'training', TASKS)}/runs", json={})
    assert started.status_code == 201, started.text
    run: dict[str, Any] = started.json()
    return run


def opened(page: Page, run: dict[str, Any]) -> Page:
    page.goto(f"/#/workflow-runs/{run['id']}")
    expect(page.locator(".outcome")).to_be_visible(timeout=ENDED_WITHIN_MS)
    return page


def test_a_run_with_handled_failures_says_it_succeeded_and_how_many_failed(
    page: Page, handled_run: dict[str, Any]
) -> None:
    opened(page, handled_run)
    expect(page.locator(".outcome")).to_have_text(
        "Ended: succeeded, 2 tasks failed and were handled"
    )


def test_edges_go_around_boxes_and_end_in_arrowheads(
    page: Page, handled_run: dict[str, Any]
) -> None:
    opened(page, handled_run)
    edges = page.evaluate(EDGE_GEOMETRY)
    joined = sorted((edge["from"], edge["to"]) for edge in edges)
    assert joined == sorted(
        (up, task["name"]) for task in TASKS for up in task.get("depends_on", [])
    )
    for edge in edges:
        assert edge["passed"] == [], edge  # from one box's side to the other's, through none
        assert edge["arrowhead"], edge


def test_edges_of_a_tangled_definition_go_around_every_box(page: Page, http: httpx.Client) -> None:
    page.goto(f"/#/workflows?workflow={created(http, 'tangle', TANGLE)}")
    expect(page.locator("svg.dag g.task")).to_have_count(len(TANGLE))
    edges = page.evaluate(EDGE_GEOMETRY)
    assert len(edges) == sum(len(task["depends_on"]) for task in TANGLE)
    assert [edge for edge in edges if edge["passed"] or not edge["arrowhead"]] == []


def test_each_state_has_its_own_colour_and_the_legend_names_those_shown(
    page: Page, handled_run: dict[str, Any]
) -> None:
    opened(page, handled_run)
    expect(page.locator('g.task[data-task="train"]')).to_have_attribute(
        "data-state", "upstream_failed"
    )
    colours = page.evaluate(COLOURS)
    assert colours["train"] != colours["features"]  # upstream_failed is not failed's red
    assert len({colours["prepare"], colours["features"], colours["train"]}) == 3
    legend = page.evaluate(LEGEND_COLOURS)
    assert set(legend) == {"succeeded", "failed", "upstream_failed"}
    assert legend["failed"] == colours["features"]
    assert legend["upstream_failed"] == colours["train"]
    assert legend["succeeded"] == colours["prepare"]
    badges = page.locator("table tr").filter(has_text="train").locator(".state")
    expect(badges.first).to_have_text("upstream_failed")  # the tasks table, in the graph's colour
    badge_colour = badges.first.evaluate("badge => getComputedStyle(badge).backgroundColor")
    assert badge_colour == colours["train"]
