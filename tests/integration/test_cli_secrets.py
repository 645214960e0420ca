"""``herder secret set|list|delete``: the value from standard input or a file, never an
argument; nothing printed ever holds it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from herder.cli import common
from herder.cli.common import app
from herder.client import HerderClient
from herder.domain.alerts.rules import ChannelRequest
from herder.domain.errors import Unavailable
from herder.domain.hooks import HookRequest
from herder.keyring import Keyring, new_key, parse_keys
from herder.store.store import Store
from tests.integration.conftest import Api

VALUE = "cli-v4lue-" + os.urandom(6).hex()


Secret = Callable[..., Result]


@pytest.fixture
def secret(api: Api, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Secret:
    """Runs ``herder secret ARGS…`` with ``stdin`` as its standard input."""
    monkeypatch.setenv("HERDER_HOME", str(tmp_path))
    monkeypatch.setenv("HERDER_URL", "http://testserver")
    monkeypatch.setenv("HERDER_API_KEY", api.admin_key)
    monkeypatch.setattr(common.out, "width", 250)

    def connect(url: str, api_key: str, **options: Any) -> HerderClient:
        return HerderClient(url, api_key, http=api.http, **options)

    monkeypatch.setattr(common, "HerderClient", connect)

    def run(*args: str, stdin: str = "") -> Result:
        return CliRunner().invoke(app, ["secret", *args], input=stdin)

    return run


def test_set_from_stdin_or_a_file_then_list_and_delete(
    secret: Secret, api: Api, tmp_path: Path
) -> None:
    created = secret("set", "API_TOKEN", stdin=VALUE)
    assert created.exit_code == 0, created.output
    assert "created secret API_TOKEN (version 1)" in created.output
    value_file = tmp_path / "value"
    value_file.write_text(VALUE + "-2\n")
    updated = secret("set", "API_TOKEN", "--from-file", str(value_file))
    assert "updated secret API_TOKEN (version 2)" in updated.output
    listed = secret("list")
    assert "API_TOKEN" in listed.output
    as_json = secret("list", "--json")
    assert '"version": 2' in as_json.output
    outputs = created.output + updated.output + listed.output + as_json.output
    assert VALUE not in outputs
    with api.store.database.read() as connection:
        revealed = api.store.secrets.reveal(connection, api.tenant_id, {"T": "API_TOKEN"})
    assert revealed == {"T": VALUE + "-2\n"}  # a file's bytes exactly
    deleted = secret("delete", "API_TOKEN")
    assert (deleted.exit_code, deleted.output.strip()) == (0, "deleted secret API_TOKEN")
    assert secret("delete", "API_TOKEN").exit_code == 1


def test_a_value_is_never_taken_as_an_argument(secret: Secret) -> None:
    refused = secret("set", "API_TOKEN", VALUE)
    assert refused.exit_code != 0
    assert secret("list", "--json").output.strip() == "[]"


def test_a_bad_name_is_refused_saying_why(secret: Secret) -> None:
    refused = secret("set", "1BAD", stdin="x")
    assert refused.exit_code == 1
    assert "letters, digits and '_'" in str(refused.exception) + refused.output


def test_reencrypt_seals_every_secret_channel_and_hook_secret_with_the_first_key(
    database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    old, new = new_key(), new_key()
    before = Store(database_url, keyring=Keyring.of(parse_keys(old, "old")))
    tenant_id = before.access.create_tenant("t").id
    before.secrets.put(tenant_id, "API_TOKEN", VALUE)
    channel = ChannelRequest(name="pager", url="https://hooks.example.com/h")
    before.alert_channels.create(tenant_id, channel, allow_private=False)
    hook = before.hooks.create(tenant_id, HookRequest(name="github", secret="s" * 20))
    before.close()
    monkeypatch.setenv("HERDER_DATABASE_URL", database_url)
    monkeypatch.setenv("HERDER_SECRETS_KEY", f"{new},{old}")
    done = CliRunner().invoke(app, ["secret", "reencrypt", "--home", str(tmp_path)])
    assert done.exit_code == 0, done.output
    rotated = Keyring.of(parse_keys(new, "new"))
    assert f"sealed 1 secret(s) again with key {rotated.current_key_id}" in done.output
    assert f"sealed 1 alert channel secret(s) again with key {rotated.current_key_id}" in (
        done.output
    )
    assert f"sealed 1 inbound webhook secret(s) again with key {rotated.current_key_id}" in (
        done.output
    )
    after = Store(database_url, keyring=rotated)
    assert after.secrets.key_ids_in_use() == {rotated.current_key_id}
    assert after.channel_secrets.key_ids_in_use() == {rotated.current_key_id}
    assert after.hooks.receiver(hook.id).secret == "s" * 20  # opens with the new key alone
    after.close()
    lacking = Store(database_url, keyring=Keyring.of(parse_keys(new_key(), "other")))
    with pytest.raises(Unavailable, match="does not open here"):
        lacking.hooks.receiver(hook.id)  # a 503 to the sender, never a 500
    lacking.close()
