"""``herder secret …``: a tenant's secrets. A value is read from standard input or a file,
never from the command line (where ``ps`` and shell history would show it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel

from herder.cli.common import HomeOption, JsonFlag, app, client, fail, out, print_json, when
from herder.cli.views import Field, Listing
from herder.domain.secrets import Secret
from herder.settings import Settings

secret_app = typer.Typer(
    help="Secrets: values a job's attempts get in their environment, never shown again.",
    no_args_is_help=True,
)
app.add_typer(secret_app, name="secret")


def _read_value(from_file: Path | None) -> str:
    """The value, exactly as given: a file's bytes, what is piped in, or a line typed at a
    hidden prompt."""
    if from_file is not None:
        try:
            return from_file.read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise fail(f"cannot read {from_file}: {error}") from error
    if sys.stdin.isatty():
        value: str = typer.prompt("value", hide_input=True)
        return value
    return sys.stdin.read()


@secret_app.command("set")
def secret_set(
    name: str,
    from_file: Annotated[
        Path | None, typer.Option("--from-file", help="read the value from this file")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a secret or give it a new value, read from standard input (or --from-file).
    Attempts that start afterwards get the new value."""
    value = _read_value(from_file)
    with client() as herder:
        secret, created = herder.set_secret(name, value)
    if as_json:
        print_json(secret)
        return
    what = "created" if created else "updated"
    out.print(f"{what} secret {secret.name} (version {secret.version})")


@secret_app.command("list")
def secret_list(as_json: JsonFlag = False) -> None:
    """Every secret's name, version and times (never a value)."""
    with client() as herder:
        items: list[BaseModel] = []
        cursor = None
        while True:
            page = herder.list_secrets(limit=1000, cursor=cursor)
            items += page.items
            cursor = page.next_cursor
            if cursor is None:
                break
    if as_json:
        print_json(items)
        return
    table = Listing("NAME", "VERSION", "CREATED", Field("UPDATED", drop=1))
    for secret in items:
        assert isinstance(secret, Secret)
        table.add_row(secret.name, str(secret.version), when(secret.created_at),
                      when(secret.updated_at))  # fmt: skip
    out.print(table)


@secret_app.command("delete")
def secret_delete(name: str) -> None:
    """Delete a secret: attempts that start afterwards and need it fail, saying so."""
    with client() as herder:
        herder.delete_secret(name)
    out.print(f"deleted secret {name}")


@secret_app.command("reencrypt")
def secret_reencrypt(home: HomeOption = None) -> None:
    """After putting a new key first in HERDER_SECRETS_KEY (or the key file): seal every
    stored secret, alert channel secret and inbound webhook secret with it, so the old keys
    can be dropped. Runs
    against the database."""
    from herder.server_keys import server_keyring
    from herder.store.store import Store

    settings = Settings.from_environment(home=home)
    keyring = server_keyring(settings)
    if keyring is None:
        raise fail("no secrets key configured: set HERDER_SECRETS_KEY or HERDER_SECRETS_KEY_FILE")
    store = Store(settings.database_url, keyring=keyring)
    try:
        done = store.secrets.reencrypt()
        channels = store.channel_secrets.reencrypt()
        hooks = store.hooks.reencrypt()
    finally:
        store.close()
    out.print(f"sealed {done} secret(s) again with key {keyring.current_key_id}")
    out.print(f"sealed {channels} alert channel secret(s) again with key {keyring.current_key_id}")
    out.print(f"sealed {hooks} inbound webhook secret(s) again with key {keyring.current_key_id}")
