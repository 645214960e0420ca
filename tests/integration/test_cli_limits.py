"""``herder limit …`` against the in-process API (docs/flow-control.md)."""

from __future__ import annotations

import json

from typer.testing import Result

from herder.client import ApiError
from tests.integration.conftest import Api, Herder


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_limits_are_created_listed_shown_changed_keyed_and_deleted(
    api: Api, herder: Herder
) -> None:
    created = json.loads(
        ok(herder("limit", "create", "partner-api", "--max-running", "2", "--rate", "10/60",
                  "--strategy", "drop", "--description", "the partner's API", "--json"))
    )  # fmt: skip
    assert created["rate"] == {"count": 10, "period_seconds": 60}
    assert created["strategy"] == "drop"
    assert "partner-api" in ok(herder("limit", "list"))
    assert "the partner's API" in ok(herder("limit", "show", "partner-api"))
    changed = json.loads(
        ok(herder("limit", "update", "partner-api", "--no-rate", "--max-running", "3", "--json"))
    )
    assert changed["rate"] is None
    assert changed["max_running"] == 3
    job = {
        "name": "sync", "runtime": "shell", "command": "true",
        "limits": [{"limit": "partner-api", "key": "acme"}],
    }  # fmt: skip
    job_id = api.http.post("/v1/jobs", headers=api.admin, json=job).json()["id"]
    assert api.http.post(f"/v1/jobs/{job_id}/runs", headers=api.admin).status_code == 201
    assert json.loads(ok(herder("limit", "keys", "partner-api", "--json"))) == [
        {"key": "acme", "running": 0, "queued": 1, "scheduled": 0}
    ]
    assert "acme" in ok(herder("limit", "keys", "partner-api"))
    refused = herder("limit", "delete", "partner-api")
    assert isinstance(refused.exception, ApiError)
    assert "job sync" in str(refused.exception)


def test_a_bad_rate_or_nothing_to_change_is_said_plainly(herder: Herder) -> None:
    assert herder("limit", "create", "x", "--rate", "ten").exit_code != 0
    zero = herder("limit", "create", "x", "--max-running", "0")
    assert isinstance(zero.exception, ApiError)
    assert "max_running" in str(zero.exception)
    ok(herder("limit", "create", "x", "--max-running", "1"))
    assert herder("limit", "update", "x").exit_code != 0


def test_a_limit_debounces_from_the_command_line(herder: Herder) -> None:
    created = json.loads(
        ok(herder("limit", "create", "rebuilds", "--debounce", "60", "--debounce-keep", "first",
                  "--debounce-max-wait", "600", "--json"))
    )  # fmt: skip
    assert created["debounce"] == {"window_seconds": 60, "keep": "first", "max_wait_seconds": 600}
    assert "60s, first" in ok(herder("limit", "show", "rebuilds"))
    assert herder("limit", "create", "x", "--debounce-keep", "last").exit_code != 0
    ok(herder("limit", "update", "rebuilds", "--max-running", "1"))
    changed = json.loads(ok(herder("limit", "update", "rebuilds", "--no-debounce", "--json")))
    assert changed["debounce"] is None
