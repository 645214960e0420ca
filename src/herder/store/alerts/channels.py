"""A tenant's alert channels: webhook targets with the secret their deliveries are signed
with. The secret is made here, shown once when the channel is created, and kept sealed with
the server's keyring (``channel_secrets``): it must be at hand to sign."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Connection, delete, insert, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.alerts.rules import Channel, ChannelChanges, ChannelRequest, CreatedChannel
from herder.domain.alerts.webhooks import is_private_host
from herder.domain.errors import Invalid
from herder.domain.ids import new_id
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.store.alerts.channel_secrets import ChannelSecrets
from herder.store.alerts.deliveries import new_delivery
from herder.store.database import Database
from herder.store.named import NamedRows
from herder.store.notifications import notify_alert_delivery
from herder.store.schema import alert_channels, alert_deliveries, alert_rules


def _channel(row: Any) -> Channel:
    return Channel.model_validate(dict(row._mapping))


ROWS = NamedRows(alert_channels, "alert channel", _channel, found_by=("id",))


def check_target(url: str, *, allow_private: bool) -> None:
    """Refuse a literal loopback, private or link-local target unless the server allows
    them. A name is judged when it is resolved, at every delivery attempt, which then
    connects to the address it checked (``control/webhooks.py``)."""
    host = urlsplit(url).hostname or ""
    if not allow_private and is_private_host(host):
        raise Invalid(
            f"url points at a private or loopback address ({host}); this server does not "
            "send webhooks there (HERDER_ALERTS_PRIVATE_TARGETS)",
            field="url",
        )


class ChannelRepository:
    def __init__(self, database: Database, clock: Clock, secrets: ChannelSecrets) -> None:
        self._db = database
        self._clock = clock
        self._secrets = secrets

    def create(
        self, tenant_id: str, request: ChannelRequest, *, allow_private: bool
    ) -> CreatedChannel:
        url = str(request.url)
        check_target(url, allow_private=allow_private)
        now = self._clock.now()
        secret = "whsec_" + secrets.token_urlsafe(32)
        channel_id = new_id("ach", epoch_ms(now))
        sealed = self._secrets.sealed_columns(tenant_id, channel_id, secret)
        columns = {"kind": request.kind, "url": url, "enabled": request.enabled, **sealed}
        with self._db.write() as connection:
            channel = ROWS.insert(connection, tenant_id, channel_id, request.name, columns, now)
        return CreatedChannel(**channel.model_dump(), secret=secret)

    def get(self, tenant_id: str, channel_id: str) -> Channel:
        with self._db.read() as connection:
            return ROWS.get(connection, tenant_id, channel_id)

    def list(
        self,
        tenant_id: str,
        *,
        page: PageRequest = PageRequest(),
        name: str | None = None,
    ) -> Page[Channel]:
        with self._db.read() as connection:
            return ROWS.page(connection, tenant_id, page, name=name)

    def update(
        self, tenant_id: str, channel_id: str, changes: ChannelChanges, *, allow_private: bool
    ) -> Channel:
        values: dict[str, Any] = changes.model_dump(exclude_none=True)
        if changes.url is not None:
            values["url"] = str(changes.url)
            check_target(values["url"], allow_private=allow_private)
        with self._db.write() as connection:
            if not values:  # nothing to change: nothing written, not even its updated_at
                return ROWS.get(connection, tenant_id, channel_id)
            return ROWS.edit(connection, tenant_id, channel_id, lambda _: values, self._clock.now())

    def delete(self, tenant_id: str, channel_id: str) -> None:
        """The channel and its deliveries go; rules that named it no longer do."""
        with self._db.write() as connection:
            ROWS.delete(connection, tenant_id, channel_id)
            rules = connection.execute(
                select(alert_rules.c.id, alert_rules.c.channel_ids).where(
                    alert_rules.c.tenant_id == tenant_id
                )
            ).all()
            for rule in rules:
                if channel_id in rule.channel_ids:
                    kept = [one for one in rule.channel_ids if one != channel_id]
                    connection.execute(
                        update(alert_rules)
                        .where(alert_rules.c.id == rule.id)
                        .values(channel_ids=kept)
                    )
            connection.execute(
                delete(alert_deliveries).where(alert_deliveries.c.channel_id == channel_id)
            )

    def send_test(self, tenant_id: str, channel_id: str) -> str:
        """Queue a test delivery on the channel (the sender posts it); its id."""
        with self._db.write() as connection:
            channel = ROWS.get(connection, tenant_id, channel_id)
            now = self._clock.now()
            payload = {
                "event": "test",
                "channel": {"id": channel.id, "name": channel.name},
                "message": "a test of this alert channel",
                "at": now.isoformat(),
            }
            row = new_delivery(tenant_id, channel.id, None, "test", payload, now)
            connection.execute(insert(alert_deliveries).values(**row))
            notify_alert_delivery(self._db, connection)
            return str(row["id"])


def add_deliveries(
    database: Database,
    connection: Connection,
    tenant_id: str,
    channel_ids: list[str],
    incident_id: str | None,
    event: str,
    payload: dict[str, Any],
    now: datetime,
) -> list[str]:
    """One pending delivery per enabled channel of the tenant among ``channel_ids``; the
    sender is woken once they commit."""
    enabled = (
        connection.execute(
            select(alert_channels.c.id).where(
                alert_channels.c.tenant_id == tenant_id,
                alert_channels.c.id.in_(channel_ids),
                alert_channels.c.enabled.is_(True),
            )
        )
        .scalars()
        .all()
    )
    rows = [
        new_delivery(tenant_id, channel, incident_id, event, payload, now) for channel in enabled
    ]
    if rows:
        connection.execute(insert(alert_deliveries), rows)
        notify_alert_delivery(database, connection)
    return [row["id"] for row in rows]
