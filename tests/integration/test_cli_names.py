"""Names and starts of ids in the CLI, on both stores: every kind of id a table shows is the
start the CLI takes back, never cut at 80 columns; ``-q`` prints whole ids; schedules, alert
channels and rules are taken by name (one that looks like an id's start too), and tables name
channels, rules, tenants and the keys that acted rather than show their ids."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from herder.cli import common
from herder.cli.ids import MIN_PREFIX_CHARACTERS
from herder.domain.models import Role
from tests.integration.conftest import Api, Herder
from tests.integration.test_alerts_api import channel
from tests.integration.test_cli_runs import ok
from tests.integration.test_id_prefix import (
    two_events,
    two_hooks,
    two_keys,
    two_limits,
    two_pools,
    two_tenants,
    two_triggers,
)


def two_workers(api: Api) -> list[str]:
    return [api.register_worker(), api.register_worker()]


KINDS = [
    pytest.param(two_limits, ("limit", "list"), ("limit", "show"), id="limits"),
    pytest.param(two_triggers, ("trigger", "list"), ("trigger", "show"), id="triggers"),
    pytest.param(two_hooks, ("hook", "list"), ("hook", "show"), id="hooks"),
    pytest.param(two_pools, ("pool", "list"), ("pool", "show"), id="pools"),
    pytest.param(two_tenants, ("tenant", "list"), ("tenant", "show"), id="tenants"),
    pytest.param(two_keys, ("key", "list"), ("key", "revoke"), id="keys"),
    pytest.param(two_events, ("event", "list"), ("event", "show"), id="events"),
    pytest.param(two_workers, ("worker", "list"), ("worker", "drain"), id="workers"),
]


@pytest.mark.parametrize(("make", "listing", "taking"), KINDS)
def test_a_table_at_80_columns_shows_starts_that_its_commands_take_back(
    api: Api,
    herder: Herder,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[Api], list[str]],
    listing: tuple[str, ...],
    taking: tuple[str, ...],
) -> None:
    made = make(api)
    kind = made[0].partition("_")[0]
    quiet = ok(herder(*listing, "-q")).splitlines()
    assert set(made) <= set(quiet)  # whole ids, one a line (the tenants' own key and tenant too)
    assert all(re.fullmatch(rf"{kind}_[0-9A-Z]{{26}}", line) for line in quiet)
    monkeypatch.setattr(common.out, "width", 80)
    listed = ok(herder(*listing))
    assert not re.search(rf"{kind}_[0-9A-Z]*…", listed)  # never cut, nor wrapped
    shown = re.findall(rf"\b{kind}_[0-9A-Z]+", listed)
    for identifier in made:
        (start,) = [cell for cell in shown if identifier.startswith(cell)]
        assert len(start) - len(kind) - 1 >= MIN_PREFIX_CHARACTERS
        assert identifier in ok(herder(*taking, start))  # the item, its id whole


def test_a_schedule_is_taken_by_its_name_even_one_that_reads_as_an_id(
    api: Api, herder: Herder
) -> None:
    api.create_job("etl")
    nightly = ok(herder("schedule", "create", "etl", "@daily", "--name", "nightly-etl", "-q"))
    batch = ok(herder("schedule", "create", "etl", "@hourly", "--name", "sch_batch", "-q"))
    nightly, batch = nightly.strip(), batch.strip()
    assert nightly in ok(herder("schedule", "show", "nightly-etl"))
    assert ok(herder("schedule", "pause", "nightly-etl")) == f"paused {nightly}\n"
    assert batch in ok(herder("schedule", "show", "sch_batch"))
    assert len(ok(herder("schedule", "next", "nightly-etl", "--count", "2")).splitlines()) == 2
    assert len(ok(herder("schedule", "next", "0 3 * * *", "--count", "2")).splitlines()) == 2
    unknown = herder("schedule", "delete", "weekly")
    assert unknown.exit_code == 1
    assert "no schedule is named weekly" in unknown.output


def test_alert_channels_and_rules_are_taken_and_shown_by_name(api: Api, herder: Herder) -> None:
    ops = str(channel(api, "ops")["id"])
    job_id = api.create_job("nightly-report")["id"]
    rule = json.loads(
        ok(herder("alert", "rule", "create", "report-fails", "--kind", "run_failed",
                  "--channel", "ops", "--param", "job_id=nightly-report", "--json"))
    )  # fmt: skip
    assert (rule["channel_ids"], rule["params"]["job_id"]) == ([ops], job_id)
    (row,) = [line for line in ok(herder("alert", "rule", "list")).splitlines() if "report" in line]
    assert " ops " in row
    assert '"job_id": "nightly-report"' in row
    assert "ach_" not in row  # the channel and the job by name, not by id
    assert not re.search(r"job_[0-9A-Z]", row)
    assert "queued test delivery" in ok(herder("alert", "channel", "test", "ops"))
    (delivery,) = [
        line for line in ok(herder("alert", "deliveries")).splitlines() if "dlv_" in line
    ]
    assert " ops " in delivery
    deleted = ok(herder("alert", "rule", "delete", "report-fails"))
    assert deleted == f"deleted alert rule {rule['id']}\n"
    assert ok(herder("alert", "channel", "delete", "ops")) == f"deleted alert channel {ops}\n"
    unknown = herder("alert", "channel", "test", "ops")
    assert unknown.exit_code == 1
    assert "no alert channel is named ops" in unknown.output


def test_a_run_event_names_the_key_that_acted_by_its_name_and_role(
    api: Api, herder: Herder
) -> None:
    key, token = api.store.access.create_api_key(api.tenant_id, Role.OPERATOR, "ci")
    job = api.create_job("forever", command="sleep 3600")
    run_id = ok(herder("run", "start", "forever", "-q", key=token)).strip()
    ok(herder("run", "cancel", run_id, key=token))
    events = api.http.get(f"/v1/runs/{run_id}/events", headers=api.admin).json()
    by_key = [event for event in events if event["actor"] == f"user:{key.id}"]
    assert by_key
    assert {event["actor_name"] for event in by_key} == {"ci (operator)"}
    assert all(event["actor_name"] is None for event in events if event not in by_key)
    shown = ok(herder("run", "show", run_id))
    assert "ci (operator)" in shown
    assert f"user:{key.id}" not in shown
    assert job["id"] not in shown  # the job by its name


def test_quiet_creates_print_the_whole_id_alone(api: Api, herder: Herder) -> None:
    job_id = ok(herder("job", "create", "nightly", "--command", "true", "-q")).strip()
    assert re.fullmatch(r"job_[0-9A-Z]{26}", job_id)
    channel(api, "ops")
    rule_id = ok(
        herder("alert", "rule", "create", "fails", "--kind", "run_failed", "--channel", "ops",
               "--param", f"job_id={job_id}", "-q")
    ).strip()  # fmt: skip
    assert ok(herder("alert", "rule", "list", "-q")).splitlines() == [rule_id]
    ok(herder("alert", "channel", "test", "ops"))
    (delivery,) = ok(herder("alert", "deliveries", "-q")).splitlines()
    assert re.fullmatch(r"dlv_[0-9A-Z]{26}", delivery)
    assert ok(herder("alert", "list", "-q")) == ""  # no incident yet
