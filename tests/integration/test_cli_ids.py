"""Ids at 80 columns and in pipes, on both stores: a table shows each id as a start the CLI
takes back, ``-q`` prints whole ids one a line, and every kind of id is named by its start."""

from __future__ import annotations

import json
import re

import pytest

from herder.cli import common
from tests.integration.conftest import Api, Herder
from tests.integration.test_alerts_api import channel
from tests.integration.test_cli_runs import batch, ok
from tests.integration.test_workflows import job, workflow


def cells(output: str, prefix: str) -> list[str]:
    return re.findall(rf"\b{prefix}_[0-9A-Z]+", output)


def test_a_run_table_at_80_columns_shows_starts_the_cli_takes_back(
    api: Api, herder: Herder, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = api.create_job("a-job-with-a-rather-long-name", retry={"max_attempts": 1})
    ids = sorted(batch(api, job["id"], 3), reverse=True)  # newest first, as listed
    monkeypatch.setattr(common.out, "width", 80)
    listed = ok(herder("run", "list"))
    assert not re.search(r"run_[0-9A-Z]*…", listed)  # never cut, nor wrapped
    shown = cells(listed, "run")
    assert len(shown) == 3
    for identifier, start in zip(ids, shown, strict=True):
        assert len("run_") + 10 < len(start) < len(identifier)  # past the shared time, as git
        assert json.loads(ok(herder("run", "show", start, "--json")))["id"] == identifier


def test_a_lone_id_is_shown_with_what_the_cli_asks_for(api: Api, herder: Herder) -> None:
    (run_id,) = batch(api, api.create_job()["id"], 1)
    (shown,) = cells(ok(herder("run", "list")), "run")
    assert shown == run_id[: len("run_") + 8]
    assert json.loads(ok(herder("run", "show", shown, "--json")))["id"] == run_id
    assert run_id in ok(herder("run", "show", shown))  # one run's view shows it whole


def test_quiet_prints_whole_ids_that_feed_other_commands(api: Api, herder: Herder) -> None:
    api.create_job("forever", command="sleep 3600")
    started = ok(herder("run", "start", "forever", "-q")).splitlines()
    more = ok(herder("run", "start", "forever", "--count", "2", "--quiet")).splitlines()
    assert [len(run_id) for run_id in started + more] == [len("run_") + 26] * 3
    listed = ok(herder("run", "list", "-q")).splitlines()
    assert sorted(listed) == sorted(started + more)
    for run_id in started + more:  # herder run start forever -q | xargs herder run cancel
        ok(herder("run", "cancel", run_id))
    states = {run["state"] for run in json.loads(ok(herder("run", "list", "--json")))["items"]}
    assert states == {"cancelled"}


def test_schedules_are_shown_and_named_by_the_start_of_their_id(
    api: Api, herder: Herder, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.create_job("nightly")
    made = [ok(herder("schedule", "create", "nightly", "@daily", "-q")).strip() for _ in range(2)]
    assert [len(schedule_id) for schedule_id in made] == [len("sch_") + 26] * 2
    assert ok(herder("schedule", "list", "-q")).splitlines() == sorted(made, reverse=True)
    monkeypatch.setattr(common.out, "width", 80)
    listed = ok(herder("schedule", "list"))
    assert not re.search(r"sch_[0-9A-Z]*…", listed)
    shown = cells(listed, "sch")
    for identifier, start in zip(sorted(made, reverse=True), shown, strict=True):
        assert len(start) < len(identifier)
        assert ok(herder("schedule", "pause", start)) == f"paused {identifier}\n"
        assert identifier in ok(herder("schedule", "show", start))
    newest = sorted(made)[-1]
    assert f"resumed {newest}" in ok(herder("schedule", "resume", shown[0].lower()))
    short = herder("schedule", "show", made[0][:11])
    assert short.exit_code == 1
    assert f"no schedule {made[0][:11]}: give 8 characters after sch_ or more" in short.output
    unknown = herder("schedule", "delete", "sch_ZZZZZZZZ")
    assert unknown.exit_code == 1
    assert "no schedule starts with sch_ZZZZZZZZ" in unknown.output


def test_workflow_runs_are_shown_and_named_by_the_start_of_their_id(
    api: Api, herder: Herder, monkeypatch: pytest.MonkeyPatch
) -> None:
    job(api, "work")
    flow = str(workflow(api, "flow", tasks=[{"name": "only", "job": "work"}])["id"])
    assert ok(herder("workflow", "list", "-q")).splitlines() == [flow]
    (flow_start,) = cells(ok(herder("workflow", "list")), "wf")
    assert flow_start == flow[: len("wf_") + 8]
    started = ok(herder("workflow", "run", flow_start, "-q")).strip()
    assert started.startswith("wfrun_")
    assert len(started) == len("wfrun_") + 26
    assert ok(herder("workflow", "runs", "--quiet")).splitlines() == [started]
    monkeypatch.setattr(common.out, "width", 80)
    (shown,) = cells(ok(herder("workflow", "runs")), "wfrun")
    assert shown == started[: len("wfrun_") + 8]
    assert started in ok(herder("workflow", "show", shown))
    cancelled = json.loads(ok(herder("workflow", "cancel", shown, "--json")))
    assert (cancelled["id"], cancelled["state"]) == (started, "cancelled")
    short = herder("workflow", "resume", started[:12])
    assert short.exit_code == 1
    assert f"no workflow run {started[:12]}: give 8 characters after wfrun_" in short.output


def test_alert_channels_and_rules_are_named_by_the_start_of_their_id(
    api: Api, herder: Herder, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = str(channel(api)["id"])
    assert ok(herder("alert", "channel", "list", "-q")).splitlines() == [made]
    monkeypatch.setattr(common.out, "width", 80)
    (shown,) = cells(ok(herder("alert", "channel", "list")), "ach")
    assert shown == made[: len("ach_") + 8]
    rule = json.loads(
        ok(herder("alert", "rule", "create", "failing", "--kind", "run_failed",
                  "--channel", shown, "--json"))
    )  # fmt: skip
    assert rule["channel_ids"] == [made]
    (rule_start,) = cells(ok(herder("alert", "rule", "list")), "alr")
    assert ok(herder("alert", "rule", "delete", rule_start)) == f"deleted alert rule {rule['id']}\n"
    assert "queued test delivery" in ok(herder("alert", "channel", "test", shown))
    unknown = herder("alert", "channel", "delete", "ach_ZZZZZZZZ")
    assert unknown.exit_code == 1
    assert "no alert channel starts with ach_ZZZZZZZZ" in unknown.output
    assert ok(herder("alert", "channel", "delete", shown)) == f"deleted alert channel {made}\n"


def test_jobs_are_named_by_the_start_of_their_id_or_by_a_name_that_looks_like_one(
    api: Api, herder: Herder, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = str(api.create_job("nightly")["id"])
    batch_job = str(api.create_job("job_batch")["id"])  # a name that reads as an id's start
    assert ok(herder("job", "list", "-q")).splitlines() == [batch_job, made]
    monkeypatch.setattr(common.out, "width", 80)
    shown = cells(ok(herder("job", "list")), "job")
    assert [batch_job.startswith(shown[0]), made.startswith(shown[1])] == [True, True]
    assert len(shown[1]) < len(made)
    started = ok(herder("run", "start", shown[1], "-q")).strip()
    assert json.loads(ok(herder("run", "show", started, "--json")))["job_id"] == made
    assert made in ok(herder("job", "show", shown[1]))  # one job's view: its id whole
    assert batch_job in ok(herder("job", "show", "job_batch"))
