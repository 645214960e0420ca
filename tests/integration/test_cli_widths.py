"""Every list and show command at 80 columns, on data with long names: one object's view is
key/value lines, never a one-row table; a listing drops columns before it cuts a name, a
state, a date or an id, and only free text (a message, a reason, a summary…) ends in "…"."""

from __future__ import annotations

import bisect
import itertools
import json
from typing import Any

import pytest
from rich.cells import cell_len

from herder.cli import common
from herder.control.alerts import AlertEvaluator
from tests.integration.conftest import Api, Herder
from tests.integration.test_alerts_api import channel
from tests.integration.test_cli_runs import ok
from tests.integration.test_id_prefix import made
from tests.integration.test_workflows import Fleet, start, workflow

WIDTH = 80
JOB = "nightly-report-eu-west"
# The columns that hold free text, which alone may be cut to fit.
FREE_TEXT = {"MESSAGE", "SUMMARY", "REASON", "WAITING REASON", "URL", "PARAMS", "FILTER",
             "LABELS", "SELECTOR", "STARTED", "FIELDS", "LAST"}  # fmt: skip


def cut_columns(output: str) -> set[str]:
    """The headers of the table columns where a cell ends in "…"."""
    cut: set[str] = set()
    borders: list[int] = []
    headers: list[str] = []
    for line in output.splitlines():
        if line.startswith("┃"):
            borders = [index for index, character in enumerate(line) if character == "┃"]
            headers = [line[a + 1 : b].strip() for a, b in itertools.pairwise(borders)]
        elif line.startswith("│"):
            for index, character in enumerate(line):
                if character == "…":
                    cut.add(headers[bisect.bisect(borders, index) - 1])
    return cut


def one_row_tables(output: str) -> list[str]:
    """Headers that name an object's own fields: a show command printing a table of it."""
    return [line for line in output.splitlines() if line.startswith(("┃ ID ", "┃ NAME ", "┃ JOB "))]


@pytest.fixture
def world(api: Api) -> dict[str, str]:
    """One of every kind the CLI lists, with long names, and their ids."""
    fleet = Fleet(api)
    job_id = api.create_job(JOB, retry={"max_attempts": 1})["id"]
    channel_id = channel(api, "operations-on-call")["id"]
    rule = {"name": "report-fails", "kind": "run_failed", "channel_ids": [channel_id],
            "params": {"job_id": job_id}}  # fmt: skip
    made(api, "/v1/alert-rules", rule)
    good, bad = api.start_run(job_id)["id"], api.start_run(job_id)["id"]
    fleet.claim()
    fleet.end(good, "succeeded")
    fleet.end(bad, "failed")
    AlertEvaluator(api.store).step()  # opens an incident for the failure
    queued = api.start_run(job_id)["id"]
    schedule = {"job_id": job_id, "cron": "0 3 * * *", "timezone": "Europe/Paris",
                "name": "nightly-europe-west"}  # fmt: skip
    schedule_id = made(api, "/v1/schedules", schedule)
    api.create_job("work")
    flow = workflow(
        api, "train-and-publish", params={"dataset": "s3://ml/latest", "epochs": 20},
        tasks=[{"name": "train", "job": "work"},
               {"name": "review", "depends_on": ["train"],
                "approval": {"message": "Publish the model trained on {params.dataset}?"}}],
    )  # fmt: skip
    workflow_run = start(api, flow["id"])["id"]
    made(api, "/v1/pools", {"name": "a100-europe-west", "selector": {"gpu": "a100"}})
    made(api, "/v1/tenants", {"name": "research-europe-west"})
    made(api, "/v1/limits", {"name": "per-customer-europe", "max_running": 2})
    made(api, "/v1/triggers", {"name": "build-on-push", "event": "github.push", "job": JOB,
                               "filter": "payload.ref == 'refs/heads/main'"})  # fmt: skip
    made(api, "/v1/hooks", {"name": "github-europe-west", "event": "github.push"})
    event = api.http.post("/v1/events", headers=api.admin, json={"name": "github.push"})
    return {"good": good, "bad": bad, "queued": queued, "schedule": schedule_id,
            "workflow_run": workflow_run, "event": event.json()["event"]["id"]}  # fmt: skip


def test_every_list_and_show_command_fits_80_columns_without_cutting_what_matters(
    api: Api, herder: Herder, world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common.out, "width", WIDTH)
    run: dict[str, Any] = json.loads(ok(herder("run", "show", world["bad"], "--json")))
    created = run["created_at"].replace("T", " ")[:19]
    listings: dict[tuple[str, ...], list[str]] = {
        ("job", "list"): [JOB],
        ("run", "list"): [JOB, "succeeded", "failed", "queued", created],
        ("schedule", "list"): ["nightly-europe-west", "active"],
        ("workflow", "list"): ["train-and-publish"],
        ("workflow", "runs"): ["train-and-publish", "running"],
        ("pool", "list"): ["a100-europe-west"],
        ("tenant", "list"): ["research-europe-west"],
        ("limit", "list"): ["per-customer-europe"],
        ("trigger", "list"): ["build-on-push", "github.push"],
        ("hook", "list"): ["github-europe-west"],
        ("hook", "deliveries", "github-europe-west"): [],
        ("event", "list"): ["github.push"],
        ("key", "list"): [],
        ("worker", "list"): ["alive"],
        ("alert", "channel", "list"): ["operations-on-call"],
        ("alert", "rule", "list"): ["report-fails", "run_failed"],
        ("alert", "list"): ["report-fails", "open"],
        ("queue",): [JOB],
        ("audit",): [],
    }
    shows: dict[tuple[str, ...], list[str]] = {
        ("job", "show", JOB): [f"name: {JOB}"],
        ("run", "show", world["bad"]): [f"job: {JOB}", "state: failed", f"created: {created}"],
        ("schedule", "show", world["schedule"]): [
            "name: nightly-europe-west",
            "zone: Europe/Paris",
        ],
        ("workflow", "show", "train-and-publish"): ["workflow: train-and-publish v1"],
        ("workflow", "show", world["workflow_run"]): ["state: running"],
        ("pool", "show", "a100-europe-west"): ["name: a100-europe-west"],
        ("tenant", "show", "research-europe-west"): ["name: research-europe-west"],
        ("limit", "show", "per-customer-europe"): ["name: per-customer-europe"],
        ("trigger", "show", "build-on-push"): ["filter: payload.ref == 'refs/heads/main'"],
        ("hook", "show", "github-europe-west"): ["name: github-europe-west"],
        ("event", "show", world["event"]): ["received: "],
    }
    for command, whole in [*listings.items(), *shows.items()]:
        output = ok(herder(*command))
        assert max(map(cell_len, output.splitlines())) <= WIDTH, (command, output)
        assert cut_columns(output) <= FREE_TEXT, (command, output)
        for value in whole:
            assert value in output, (command, value, output)
    for command in shows:
        assert one_row_tables(ok(herder(*command))) == [], command
