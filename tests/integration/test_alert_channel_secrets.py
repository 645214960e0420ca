"""Alert channels' signing secrets at rest: sealed with the server's keyring and bound to
their channel, opened only by the sender — whose receivers see the same signatures as
before. A secret that does not open (no key, a key the sender lacks, a ciphertext moved from
another channel) fails the attempt with its reason recorded; secrets stored in plain text
before migration 0016 are sealed when a process with a keyring starts."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import select, text, update

from herder.control.alerts import AlertSender
from herder.domain.alerts.rules import ChannelRequest, CreatedChannel, DeliveryState
from herder.domain.alerts.webhooks import SIGNATURE_HEADER
from herder.domain.errors import Unavailable
from herder.keyring import Keyring
from herder.server_keys import check_channel_keys
from herder.settings import sqlite_url
from herder.store.database import Database
from herder.store.migrations import alembic_config
from herder.store.schema import alert_channels
from herder.store.store import Store
from tests.clones import admin_connection, database_url_named
from tests.conftest import TEST_KEYRING
from tests.integration.conftest import Api
from tests.integration.test_alert_deliveries import verified
from tests.integration.test_secrets import cells_holding, in_plain_sight
from tests.integration.webhook_receiver import Receiver, running_receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as running:
        yield running


def create_channel(store: Store, tenant_id: str, receiver: Receiver, name: str) -> CreatedChannel:
    request = ChannelRequest(name=name, url=receiver.url + "/hook")
    return store.alert_channels.create(tenant_id, request, allow_private=True)


def send_test(store: Store, tenant_id: str, channel_id: str, sender_store: Store) -> Any:
    """Queue a test delivery, let a sender on ``sender_store`` post it once; the delivery."""
    delivery_id = store.alert_channels.send_test(tenant_id, channel_id)
    AlertSender(
        sender_store.alert_deliveries, sender_store.clock,
        messages=sender_store.alert_messages, allow_private=True,
    ).step()  # fmt: skip
    (delivery,) = [
        one
        for one in store.alert_history.deliveries(tenant_id, channel_id=channel_id).items
        if one.id == delivery_id
    ]
    return delivery


def assert_signed_with(receiver: Receiver, secret: str, count: int = 1) -> None:
    assert len(receiver.requests) == count
    for request in receiver.requests:
        body = verified(request.body, request.headers[SIGNATURE_HEADER], secret)
        assert body["event"] == "test"


def test_a_channel_secret_is_nowhere_in_plain_text_and_deliveries_are_signed_with_it(
    store: Store, receiver: Receiver
) -> None:
    tenant = store.access.create_tenant("t")
    channel = create_channel(store, tenant.id, receiver, "pager")

    assert channel.secret is not None
    assert channel.secret.startswith("whsec_")
    assert cells_holding(store, in_plain_sight(channel.secret)) == []
    delivery = send_test(store, tenant.id, channel.id, store)
    assert delivery.state == DeliveryState.DELIVERED
    assert_signed_with(receiver, channel.secret)


def test_a_ciphertext_copied_to_another_channel_does_not_open_and_the_api_shows_why(
    api: Api, receiver: Receiver
) -> None:
    first, second = (
        create_channel(api.store, api.tenant_id, receiver, name) for name in ("first", "second")
    )
    with api.store.database.write() as connection:
        sealed = connection.execute(
            select(alert_channels.c.key_id, alert_channels.c.nonce, alert_channels.c.ciphertext)
            .where(alert_channels.c.id == first.id)
        ).one()  # fmt: skip
        connection.execute(
            update(alert_channels).where(alert_channels.c.id == second.id).values(**sealed._mapping)
        )

    test = api.http.post(f"/v1/alert-channels/{second.id}/test", headers=api.admin)
    assert test.status_code == 202, test.text
    AlertSender(
        api.store.alert_deliveries, api.store.clock,
        messages=api.store.alert_messages, allow_private=True,
    ).step()  # fmt: skip

    assert receiver.requests == []
    listed = api.http.get(f"/v1/alert-deliveries?channel_id={second.id}", headers=api.admin)
    (delivery,) = listed.json()["items"]
    assert delivery["state"] == "pending"  # retried later, like any failed attempt
    assert delivery["last_error"].startswith("the channel's signing secret does not open")
    assert "moved from another secret" in delivery["last_error"]
    assert first.secret not in listed.text
    assert second.secret not in listed.text


def test_a_sender_without_the_key_records_why_and_the_start_says_which_key(
    store: Store, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = store.access.create_tenant("t")
    channel = create_channel(store, tenant.id, receiver, "pager")
    other_keyring = Keyring.of([os.urandom(32)])
    other_keys = Store(store.database.url, keyring=other_keyring)
    no_keys = Store(store.database.url)
    try:
        with caplog.at_level(logging.WARNING, logger="herder.server"):
            check_channel_keys(other_keys, other_keyring)
        assert TEST_KEYRING.current_key_id in caplog.text

        lacking = send_test(store, tenant.id, channel.id, other_keys)
        keyless = send_test(store, tenant.id, channel.id, no_keys)
    finally:
        other_keys.close()
        no_keys.close()

    assert receiver.requests == []
    assert f"sealed with key {TEST_KEYRING.current_key_id}" in lacking.last_error
    assert "does not hold" in lacking.last_error
    assert "HERDER_SECRETS_KEY" in keyless.last_error
    assert lacking.state == keyless.state == DeliveryState.PENDING


def test_without_a_key_a_channel_cannot_be_created(database_url: str) -> None:
    keyless = Store(database_url)
    try:
        tenant = keyless.access.create_tenant("t")
        request = ChannelRequest(name="pager", url="https://example.com/hook")
        with pytest.raises(Unavailable, match="HERDER_SECRETS_KEY"):
            keyless.alert_channels.create(tenant.id, request, allow_private=False)
    finally:
        keyless.close()


def test_reencrypt_after_a_key_rotation_lets_the_old_key_go(
    database_url: str, receiver: Receiver
) -> None:
    old, new = os.urandom(32), os.urandom(32)
    before = Store(database_url, keyring=Keyring.of([old]))
    rotated = Store(database_url, keyring=Keyring.of([new, old]))
    after = Store(database_url, keyring=Keyring.of([new]))
    try:
        tenant = before.access.create_tenant("t")
        channel = create_channel(before, tenant.id, receiver, "pager")
        assert channel.secret is not None

        assert rotated.channel_secrets.reencrypt() == 1
        assert rotated.channel_secrets.reencrypt() == 0
        assert rotated.channel_secrets.key_ids_in_use() == {Keyring.of([new]).current_key_id}
        delivery = send_test(after, tenant.id, channel.id, after)
    finally:
        for store in (before, rotated, after):
            store.close()

    assert delivery.state == DeliveryState.DELIVERED
    assert_signed_with(receiver, channel.secret)


PLAIN_SECRET = "whsec_made-before-0016-" + os.urandom(8).hex()
MADE = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def at_0015(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at revision 0015 (URL) with a tenant; each store."""
    if request.param == "sqlite":
        url = sqlite_url(tmp_path / "herder.db")
        yield from _at_0015(url)
        return
    name = f"herder_channel_migration_{os.getpid()}"
    with admin_connection() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield from _at_0015(database_url_named(name))
    finally:
        with admin_connection() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _at_0015(url: str) -> Iterator[str]:
    database = Database(url)
    try:
        command.upgrade(alembic_config(database), "0015")
        with database.write() as connection:
            connection.execute(
                text(
                    "INSERT INTO tenants (id, name, weight, is_system, quotas, created_at)"
                    " VALUES ('ten_a', 'a', 1, false, '{}', :made)"
                ),
                {"made": MADE},
            )
    finally:
        database.dispose()
    yield url


def test_a_plain_secret_from_before_0016_keeps_signing_and_is_sealed_at_start(
    at_0015: str, receiver: Receiver
) -> None:
    database = Database(at_0015)
    with database.write() as connection:
        connection.execute(
            text(
                "INSERT INTO alert_channels (id, tenant_id, name, kind, url, secret, enabled,"
                " created_at, updated_at) VALUES ('ach_a', 'ten_a', 'old', 'webhook', :url,"
                " :secret, true, :made, :made)"
            ),
            {"url": receiver.url + "/hook", "secret": PLAIN_SECRET, "made": MADE},
        )
    database.dispose()
    keyless = Store(at_0015)
    store = Store(at_0015, keyring=TEST_KEYRING)
    try:
        keyless.migrate()
        assert store.channel_secrets.plain_count() == 1
        unsealed = send_test(keyless, "ten_a", "ach_a", keyless)  # an upgrade stops nothing
        check_channel_keys(store, TEST_KEYRING)  # what a server or scheduler does at start

        assert store.channel_secrets.plain_count() == 0
        assert cells_holding(store, in_plain_sight(PLAIN_SECRET)) == []
        sealed = send_test(store, "ten_a", "ach_a", store)
    finally:
        keyless.close()
        store.close()
    assert unsealed.state == sealed.state == DeliveryState.DELIVERED
    assert_signed_with(receiver, PLAIN_SECRET, count=2)
