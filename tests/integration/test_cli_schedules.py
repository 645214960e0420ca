"""``herder schedule …`` against the in-process API on both stores: what a schedule starts is
shown by name, and a new schedule's next fires in its own zone."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest
from typer.testing import Result

from herder.cli import ids
from tests.integration.conftest import Api, Herder
from tests.integration.test_workflows import workflow


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_a_new_schedule_shows_its_next_fires_in_its_zone_and_in_utc(
    api: Api, herder: Herder
) -> None:
    api.create_job("nightly")
    said = ok(herder("schedule", "create", "nightly", "0 3 * * *", "--timezone", "Europe/Paris"))
    assert "next fires (Europe/Paris):" in said
    fires = re.findall(r"(\S+ 03:00:00[+-]\d\d:\d\d)  \((\S+ \S+) UTC\)", said)
    assert len(fires) == 3, said
    for local, utc in fires:
        moment = datetime.fromisoformat(local)
        offset = moment.utcoffset()
        assert offset is not None
        assert offset.total_seconds() in (3600, 7200)  # CET or CEST
        assert datetime.fromisoformat(f"{utc}+00:00") == moment


def test_a_paused_schedule_says_it_fires_once_resumed(api: Api, herder: Herder) -> None:
    api.create_job("nightly")
    said = ok(herder("schedule", "create", "nightly", "@daily", "--paused"))
    assert "paused: it fires once resumed" in said
    assert "UTC)" not in said


def test_json_output_of_create_is_the_schedule_alone(api: Api, herder: Herder) -> None:
    api.create_job("nightly")
    created = json.loads(ok(herder("schedule", "create", "nightly", "@daily", "--json")))
    assert created["spec"]["cron"] == "@daily"


def test_schedules_are_listed_with_the_names_of_what_they_start(
    api: Api, herder: Herder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ids, "NAMES_PAGE", 1)  # names found across pages
    for name in ("backup", "report", "unused"):
        api.create_job(name)
    flow = workflow(api, "pipeline", tasks=[{"name": "only", "job": "report"}])
    ok(herder("schedule", "create", "backup", "@daily"))
    ok(herder("schedule", "create", "report", "@hourly"))
    ok(herder("workflow", "schedule", "pipeline", "@weekly"))

    listing = ok(herder("schedule", "list"))
    assert "backup" in listing
    assert "report" in listing
    assert "pipeline (workflow)" in listing
    assert "job_" not in listing
    assert flow["id"] not in listing
    assert "unused" not in listing

    shown = json.loads(ok(herder("schedule", "list", "--json")))["items"]
    (of_flow,) = [item for item in shown if item["workflow_id"]]
    assert "pipeline (workflow)" in ok(herder("schedule", "show", of_flow["id"]))
