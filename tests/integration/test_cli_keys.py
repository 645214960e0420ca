"""``herder key`` and ``herder audit`` against the in-process API (both stores)."""

from __future__ import annotations

import json

import pytest
from typer.testing import Result

from herder.cli.ids import short_ids
from herder.client import ApiError
from tests.integration.conftest import Api, Herder


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_a_key_is_created_listed_used_and_revoked(api: Api, herder: Herder) -> None:
    created = json.loads(
        ok(herder("key", "create", "ci", "--role", "operator", "--expires-in", "90d", "--json"))
    )
    assert (created["name"], created["role"]) == ("ci", "operator")
    assert created["expires_at"] is not None
    listing = ok(herder("key", "list"))
    assert short_ids([created["id"]])[created["id"]] in listing
    assert "operator" in listing
    assert "live" in listing
    assert created["token"].rpartition(".")[2] not in listing
    revoked = ok(herder("key", "revoke", created["id"]))
    assert f"revoked key ci ({created['id']})" in revoked
    assert "revoked" in ok(herder("key", "list"))
    refused = herder("job", "list", key=created["token"])
    assert refused.exit_code != 0
    assert isinstance(refused.exception, ApiError)
    assert "was revoked" in str(refused.exception)


def test_key_create_prints_the_token_once_with_a_warning(herder: Herder) -> None:
    output = ok(herder("key", "create", "deploy"))
    assert "shown once" in output
    assert "key_" in output.splitlines()[-1]


@pytest.mark.parametrize("expiry", ["soon", "2030-01-01T00:00:00", "5y"])
def test_an_expiry_the_cli_cannot_read_is_refused_before_any_call(
    herder: Herder, expiry: str
) -> None:
    result = herder("key", "create", "x", "--expires-in", expiry)
    assert result.exit_code == 1
    assert "--expires-in" in result.output


def test_audit_shows_who_changed_what(api: Api, herder: Herder) -> None:
    ok(herder("key", "create", "ops", "--role", "operator"))
    job = api.create_job("nightly")
    table = ok(herder("audit", "--since", "1h"))
    assert "keys.create" in table
    assert "jobs.create" in table
    assert "bootstrap admin" in table
    entries = json.loads(ok(herder("audit", "--object", str(job["id"]), "--json")))["items"]
    assert [entry["action"] for entry in entries] == ["jobs.create"]
    start = short_ids([job["id"]])[job["id"]]
    assert start in table  # the object by the start the CLI takes back
    by_start = json.loads(ok(herder("audit", "--object", start, "--json")))["items"]
    assert by_start == entries
    assert json.loads(ok(herder("audit", "--type", "schedules", "--json")))["items"] == []
    admin_key = api.admin_key.split(".")[-2]
    keys = [key["id"] for key in json.loads(ok(herder("key", "list", "--json")))["items"]]
    start = short_ids(keys)[admin_key]
    by_start = ok(herder("audit", "--key", start, "--json"))  # the key by its start, as listed
    assert {entry["key_id"] for entry in json.loads(by_start)["items"]} == {admin_key}
