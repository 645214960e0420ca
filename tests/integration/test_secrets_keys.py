"""Where the server's secrets key comes from, and rotating it: a SQLite home makes its own
key; a PostgreSQL server without one serves no secrets; a server lacking the key a stored
secret was sealed with refuses to start; re-encryption lets the old key go."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.domain.errors import Unavailable
from herder.keyring import Keyring, new_key
from herder.server import prepare
from herder.settings import Settings, sqlite_url
from herder.store.store import Store
from tests.conftest import fresh_postgres_url


def _prepared_store(home: Path, database_url: str) -> Store:
    return prepare(Settings(home=home, database_url=database_url)).store


def test_a_sqlite_home_makes_its_key_once_and_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HERDER_SECRETS_KEY", raising=False)
    url = sqlite_url(tmp_path / "herder.db")
    store = _prepared_store(tmp_path, url)
    tenant = store.access.create_tenant("t")
    store.secrets.put(tenant.id, "API_TOKEN", "v")
    store.close()
    assert (tmp_path / "secrets.key").stat().st_mode & 0o777 == 0o600
    again = _prepared_store(tmp_path, url)  # the same key: the secret still opens
    with again.database.read() as connection:
        assert again.secrets.reveal(connection, tenant.id, {"T": "API_TOKEN"}) == {"T": "v"}
    again.close()


def test_a_server_without_the_key_of_stored_secrets_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_url(tmp_path / "herder.db")
    monkeypatch.setenv("HERDER_SECRETS_KEY", new_key())
    store = _prepared_store(tmp_path, url)
    store.secrets.put(store.access.create_tenant("t").id, "API_TOKEN", "v")
    store.close()
    monkeypatch.setenv("HERDER_SECRETS_KEY", new_key())
    with pytest.raises(SystemExit, match="which this server does not have"):
        _prepared_store(tmp_path, url)
    monkeypatch.setenv("HERDER_SECRETS_KEY", "not a key")
    with pytest.raises(SystemExit, match="not base64"):
        _prepared_store(tmp_path, url)


@pytest.fixture
def postgres_url(postgres_template: str) -> Iterator[str]:
    yield from fresh_postgres_url(postgres_template)


@pytest.mark.postgres
def test_a_postgresql_server_without_a_key_serves_no_secrets_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    monkeypatch.delenv("HERDER_SECRETS_KEY", raising=False)
    store = _prepared_store(tmp_path, postgres_url)
    try:
        with pytest.raises(Unavailable, match="HERDER_SECRETS_KEY"):
            store.secrets.put(store.access.create_tenant("t").id, "API_TOKEN", "v")
        assert not (tmp_path / "secrets.key").exists()
    finally:
        store.close()


def test_reencrypting_after_a_rotation_lets_the_old_key_go(database_url: str) -> None:
    old, new = os.urandom(32), os.urandom(32)
    before = Store(database_url, keyring=Keyring.of([old]))
    tenant = before.access.create_tenant("t")
    before.secrets.put(tenant.id, "A", "first")
    before.secrets.put(tenant.id, "B", "second")
    before.close()
    rotated = Store(database_url, keyring=Keyring.of([new, old]))
    assert rotated.secrets.reencrypt(batch=1) == 2
    assert rotated.secrets.key_ids_in_use() == {Keyring.of([new]).current_key_id}
    rotated.close()
    after = Store(database_url, keyring=Keyring.of([new]))
    with after.database.read() as connection:
        opened = after.secrets.reveal(connection, tenant.id, {"X": "A", "Y": "B"})
    assert opened == {"X": "first", "Y": "second"}
    after.close()
