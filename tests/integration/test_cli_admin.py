"""The administration commands (tenant, workers, queue) against the in-process API.

The CLI's client sends its requests through the test app instead of a network socket, so these
run on both stores without starting servers; tests/system covers the real processes.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import update
from typer.testing import Result

from herder.cli.ids import short_ids
from herder.client import ApiError
from herder.domain.models import WorkerState
from herder.store.schema import workers
from tests.integration.conftest import Api, Herder
from tests.integration.dispatching import dispatch


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_tenants_are_created_shown_and_changed(herder: Herder) -> None:
    created = json.loads(
        ok(herder("tenant", "create", "team-a", "--max-gpus", "4", "--submit-rate", "50", "--json"))
    )
    assert created["quotas"]["max_gpus"] == 4
    assert created["quotas"]["submit_rate_per_second"] == 50

    table = ok(
        herder("tenant", "update", "team-a", "--weight", "3", "--max-gpus", "8",
               "--clear", "submit-rate")
    )  # fmt: skip
    assert "team-a" in table
    shown = json.loads(ok(herder("tenant", "show", created["id"], "--json")))
    assert shown["weight"] == 3
    assert shown["quotas"]["max_gpus"] == 8
    assert shown["quotas"]["submit_rate_per_second"] is None

    listing = ok(herder("tenant", "list"))
    assert "team-a" in listing
    assert "default (system)" in listing


def test_a_tenant_leaving_for_another_cell_is_listed_with_its_move(
    api: Api, herder: Herder
) -> None:
    """A cell still lists a tenant that left it (its history stays there): as moving, not as
    one that lives here."""
    tenant = json.loads(ok(herder("tenant", "create", "team-a", "--json")))
    frozen = {"state": "frozen", "cell": "b", "pools": []}
    shifted = api.http.put(f"/v1/tenants/{tenant['id']}/move", headers=api.admin, json=frozen)
    assert shifted.status_code == 200, shifted.text
    assert "team-a (frozen, cell b)" in ok(herder("tenant", "list"))
    shown = json.loads(ok(herder("tenant", "show", tenant["id"], "--json")))
    assert (shown["move_state"], shown["move_cell"]) == ("frozen", "b")


def test_tenant_update_refuses_nothing_and_unknown_quotas(herder: Herder) -> None:
    ok(herder("tenant", "create", "team-a"))
    nothing = herder("tenant", "update", "team-a")
    assert nothing.exit_code == 1
    assert "nothing to change" in nothing.output
    unknown = herder("tenant", "update", "team-a", "--clear", "max-disks")
    assert unknown.exit_code == 1
    assert "not a quota" in unknown.output
    missing = herder("tenant", "show", "no-such-team")
    assert isinstance(missing.exception, ApiError)
    assert missing.exception.status == 404


def test_a_tenants_admin_is_told_what_they_may_not_do(api: Api, herder: Herder) -> None:
    team_admin = api.other_tenant_key("team-b")
    refused = herder("tenant", "list", key=team_admin)
    assert isinstance(refused.exception, ApiError)
    assert refused.exception.status == 403
    assert "system tenant" in str(refused.exception)


def test_workers_are_listed_drained_and_undrained(api: Api, herder: Herder) -> None:
    worker_id = api.register_worker(cpu=4, memory_mb=8192)
    listing = ok(herder("worker", "list"))
    assert short_ids([worker_id])[worker_id] in listing  # as the CLI takes it back
    assert "alive" in listing
    assert "8192 MB" in listing

    assert "draining" in ok(herder("worker", "drain", worker_id))
    (listed,) = json.loads(ok(herder("worker", "list", "--json")))
    assert listed["state"] == "draining"
    assert json.loads(ok(herder("worker", "undrain", worker_id, "--json")))["state"] == "alive"

    missing = herder("worker", "drain", "wrk_missing")
    assert isinstance(missing.exception, ApiError)
    assert missing.exception.status == 404


def test_a_lost_worker_is_forgotten_and_an_alive_one_refused(api: Api, herder: Herder) -> None:
    worker_id = api.register_worker()
    refused = herder("worker", "forget", worker_id)
    assert isinstance(refused.exception, ApiError)
    assert refused.exception.status == 409
    assert "only a lost worker is forgotten" in str(refused.exception)
    with api.store.database.write() as connection:
        connection.execute(
            update(workers).where(workers.c.id == worker_id).values(state=WorkerState.LOST)
        )

    assert "it is forgotten" in ok(herder("worker", "forget", worker_id))
    assert json.loads(ok(herder("worker", "list", "--json"))) == []


def test_herder_worker_still_starts_an_agent(herder: Herder) -> None:
    assert "Run a worker agent" in ok(herder("worker", "--help"))


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--allow-cidr", "10.0.0.0/33", "is not an address or network"),
        ("--allow-cidr", "fd00::/8", "jobs have IPv4 only"),
        ("--block", "lan", "is not an address or network"),
    ],
)
def test_a_worker_network_option_that_means_nothing_is_refused_before_it_starts(
    herder: Herder, monkeypatch: pytest.MonkeyPatch, option: str, value: str, says: str
) -> None:
    monkeypatch.setenv("HERDER_WORKER_TOKEN", "wtk_unused")
    result = herder("worker", "--server", "http://testserver", option, value)
    assert result.exit_code == 1, result.output
    assert f"{option} {value!r}" in result.output
    assert says in result.output


def test_the_queue_in_dispatch_order_with_waiting_reasons(api: Api, herder: Herder) -> None:
    low = api.start_run(api.create_job("batch", priority="low")["id"])
    high = api.start_run(
        api.create_job("urgent", priority="high", replicas=2, requires={"zone": "a"})["id"]
    )
    table = ok(herder("queue"))
    shown = short_ids([str(high["id"]), str(low["id"])])  # each run as its shortest start
    assert table.index(shown[str(high["id"])]) < table.index(shown[str(low["id"])])
    assert "2 x (1 cpu, 256 MB) on zone=a" in table
    assert "not looked at by the dispatcher yet" in table
    assert " default " in table  # the tenant by its name
    assert api.tenant_id not in table

    page = json.loads(ok(herder("queue", "--job", "batch", "--json")))
    assert [item["run_id"] for item in page["items"]] == [low["id"]]
    assert page["items"][0]["priority"] == "low"


def test_run_show_says_why_a_queued_run_waits(api: Api, herder: Herder) -> None:
    run = api.start_run(api.create_job()["id"])
    shown = ok(herder("run", "show", str(run["id"])))
    assert "waiting: not looked at by the dispatcher yet" in shown


def test_a_gang_job_from_the_command_line_waits_for_its_labels(api: Api, herder: Herder) -> None:
    created = ok(
        herder(
            "job", "create", "train", "--command", "true", "--requires", "zone=eu-1",
            "--replicas", "2", "--preemptible", "--json",
        )
    )  # fmt: skip
    spec = json.loads(created)["spec"]
    assert (spec["requires"], spec["replicas"], spec["preemptible"]) == ({"zone": "eu-1"}, 2, True)
    api.register_worker()
    run = json.loads(ok(herder("run", "start", "train", "--json")))
    dispatch(api.store)
    shown = ok(herder("run", "show", run["id"]))
    assert (
        "waiting: needs 2 members of cpu 1, 256 MB at once; none of 1 workers has zone=eu-1"
        in shown
    )
