"""``herder top --once`` against the in-process API on both stores: the view a system admin
and a tenant get, and what it prints when the server refuses."""

from __future__ import annotations

import json

import pytest
from typer.testing import Result

from herder.cli import common, top
from tests.clocks import ManualClock
from tests.integration.conftest import Api, Herder
from tests.integration.registered import register_worker


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch, herder: Herder) -> Herder:
    """``herder`` printing to 80 columns."""
    monkeypatch.setattr(common.out, "width", 80)
    return herder


def test_top_once_shows_the_queue_and_the_fleet_to_a_system_admin(
    api: Api, narrow: Herder, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker_id = register_worker(api, "edge-worker-with-a-rather-long-name", cpu=2)
    job = api.create_job("too-big-to-place", resources={"cpu": 64})
    run = api.start_run(job["id"])
    beat = next(w for w in api.store.workers.fleet() if w.id == worker_id).last_heartbeat_at
    monkeypatch.setattr(top, "CLOCK", ManualClock(beat))  # "0s ago" however loaded the box
    output = ok(narrow("top", "--once"))
    assert all(len(line) <= 80 for line in output.splitlines())
    assert "herder top · the fleet" in output
    states = "scheduled 0   pending 0   queued 1   running 0   retry_wait 0   suspended 0"
    assert states in output
    assert "dead 0\n" in output
    assert "\nworkers 1 alive\n" in output
    assert "last 60 min: 0 succeeded  0 failed  0 cancelled  failure rate -" in output
    assert "queue: first 1 of 1" in output
    assert f"{str(run['id'])[:12]}  too-big-to-place  medium" in output  # as run show takes it
    row = next(line for line in output.splitlines() if line.startswith("edge-worker"))
    assert row.split() == ["edge-worker-wit…", "alive", "10", "2", "2.0", "GB", "0", "0s", "ago"]
    assert "updated " in output
    assert "refresh failed" not in output


def test_top_once_shows_a_tenant_its_own_runs_and_no_fleet(api: Api, narrow: Herder) -> None:
    register_worker(api)
    api.start_run(api.create_job("the-admins-job")["id"])
    output = ok(narrow("top", "--once", key=api.other_tenant_key("team-b")))
    assert "herder top · your tenant" in output
    assert "queued 0" in output  # the system tenant's run is not theirs
    assert "the-admins-job" not in output
    assert "workers: the fleet view needs a system admin key" in output


def test_top_refuses_a_pipe_without_once_and_intervals_out_of_bounds(herder: Herder) -> None:
    piped = herder("top")
    assert piped.exit_code == 1
    assert "give --once" in piped.output
    for interval in ("0.1", "61"):
        assert herder("top", "--interval", interval).exit_code == 2


def test_top_once_with_the_server_refusing_prints_the_error_and_fails(narrow: Herder) -> None:
    refused = narrow("top", "--once", key="not-a-key")
    assert refused.exit_code == 1
    assert "waiting for the server's first answer" in refused.output
    assert "refresh failed at" in refused.output
    assert "(HTTP 401)" in refused.output


def test_top_json_is_one_document_of_what_the_view_shows(
    api: Api, herder: Herder, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker_id = register_worker(api, "edge", cpu=2)
    run = api.start_run(api.create_job("too-big-to-place", resources={"cpu": 64})["id"])
    beat = next(w for w in api.store.workers.fleet() if w.id == worker_id).last_heartbeat_at
    monkeypatch.setattr(top, "CLOCK", ManualClock(beat))
    shown = json.loads(ok(herder("top", "--json")))  # a pipe: no terminal needed
    assert list(shown) == [
        "at", "scope", "window_minutes", "runs", "queue", "ended", "failure_rate",
        "throughput", "resources", "utilization", "workers",
    ]  # fmt: skip
    assert shown["scope"] == "fleet"
    assert shown["runs"]["queued"] == 1
    assert shown["queue"]["depth"] == 1
    (head,) = shown["queue"]["head"]
    assert head["run_id"] == run["id"]
    assert head["job_name"] == "too-big-to-place"
    assert head["waiting_reason"]  # whatever the dispatcher said last
    assert shown["ended"] == {"succeeded": 0, "failed": 0, "cancelled": 0}
    assert shown["failure_rate"] is None
    assert len(shown["throughput"]) == shown["window_minutes"] == 60
    assert shown["resources"]["capacity"]["cpu"] == 2
    assert shown["utilization"]["cpu"] == 0
    assert shown["utilization"]["gpus"] is None  # the fleet has none
    assert shown["workers"]["by_state"]["alive"] == 1
    (edge,) = shown["workers"]["items"]
    assert (edge["name"], edge["state"], edge["heartbeat_age_seconds"]) == ("edge", "alive", 0)


def test_top_json_for_a_tenant_has_no_fleet_and_a_refusal_is_no_document(
    api: Api, herder: Herder
) -> None:
    tenant = json.loads(ok(herder("top", "--json", key=api.other_tenant_key("team-b"))))
    assert tenant["scope"] == "tenant"
    assert tenant["workers"] is None
    assert tenant["utilization"] is None
    assert tenant["resources"]["capacity"] is None
    refused = herder("top", "--json", key="not-a-key")
    assert refused.exit_code == 1
    assert "could not read the server" in refused.output
    assert "{" not in refused.output
