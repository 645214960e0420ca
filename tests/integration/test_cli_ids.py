"""Ids at 80 columns and in pipes, on both stores: a table shows each id as a start the CLI
takes back, ``-q`` prints whole ids one a line, and every kind of id is named by its start."""

from __future__ import annotations

import json
import re

import pytest

from herder.cli import common
from tests.integration.conftest import Api, Herder
from tests.integration.test_cli_runs import batch, ok


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
