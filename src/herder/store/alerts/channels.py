"""A tenant's alert channels. A webhook's signing secret is made here, shown once when the
channel is created, and kept sealed with the server's keyring (``channel_secrets``): it must
be at hand to sign. A Slack channel's URL is its credential: it is kept sealed the same way
and shown masked. An email channel keeps its recipients and nothing secret."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Connection, delete, insert, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.alerts.addresses import ChannelKind, checked_address, masked_url
from herder.domain.alerts.rules import Channel, ChannelChanges, ChannelRequest, CreatedChannel
from herder.domain.alerts.webhooks import is_private_host
from herder.domain.errors import Invalid
from herder.domain.ids import new_id
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.store.alerts.channel_secrets import ChannelSecrets
from herder.store.alerts.deliveries import new_delivery
from herder.store.alerts.managed import refuse_managed
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
            "send alerts there (HERDER_ALERTS_PRIVATE_TARGETS)",
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
        url = request.url
        if request.kind is not ChannelKind.EMAIL:
            check_target(url, allow_private=allow_private)
        now = self._clock.now()
        channel_id = new_id("ach", epoch_ms(now))
        kept, secret = self._kept(tenant_id, channel_id, request.kind, url)
        columns = {"kind": request.kind, "url": url, "enabled": request.enabled, **kept}
        with self._db.write() as connection:
            channel = ROWS.insert(connection, tenant_id, channel_id, request.name, columns, now)
        return CreatedChannel(**channel.model_dump(), secret=secret)

    def _kept(
        self, tenant_id: str, channel_id: str, kind: ChannelKind, url: str
    ) -> tuple[dict[str, Any], str | None]:
        """The columns that keep what a new channel sends with — a webhook's signing secret
        (made here, and returned to be shown once), a Slack URL sealed (and shown masked) —
        or none, for email."""
        match kind:
            case ChannelKind.WEBHOOK:
                secret = "whsec_" + secrets.token_urlsafe(32)
                return self._secrets.sealed_columns(tenant_id, channel_id, secret), secret
            case ChannelKind.SLACK:
                return self._slack_columns(tenant_id, channel_id, url), None
            case ChannelKind.EMAIL:
                return {}, None

    def _slack_columns(self, tenant_id: str, channel_id: str, url: str) -> dict[str, Any]:
        sealed = self._secrets.sealed_columns(tenant_id, channel_id, url)
        return {**sealed, "url": masked_url(url)}

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

        def change(current: Any) -> dict[str, Any]:
            refuse_managed("alert channel", current)
            if changes.url is None:
                return values
            kind = ChannelKind(current.kind)
            try:
                url = checked_address(kind, changes.url)
            except ValueError as error:
                raise Invalid(f"url: {error}", field="url") from error
            if kind is not ChannelKind.EMAIL:
                check_target(url, allow_private=allow_private)
            if kind is ChannelKind.SLACK:
                return {**values, **self._slack_columns(tenant_id, current.id, url)}
            return {**values, "url": url}

        with self._db.write() as connection:
            if not values:  # nothing to change: nothing written, not even its updated_at
                return ROWS.get(connection, tenant_id, channel_id)
            return ROWS.edit(connection, tenant_id, channel_id, change, self._clock.now())

    def delete(self, tenant_id: str, channel_id: str) -> None:
        """The channel and its deliveries go; rules that named it no longer do."""
        with self._db.write() as connection:
            refuse_managed("alert channel", ROWS.row(connection, tenant_id, channel_id))
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
