"""Deliveries from the sender's side: what is due to webhooks, taken so that one sender posts
it at a time, and each attempt's outcome recorded on the row (its ``history``). Email and
Slack channels' deliveries go out as messages (``messages.py``), recorded the same way."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.alerts.addresses import ChannelKind
from herder.domain.alerts.rules import DeliveryState
from herder.domain.alerts.webhooks import retry_at
from herder.domain.ids import new_id
from herder.keyring import KeyringError
from herder.store.alerts.channel_secrets import ChannelSecrets
from herder.store.database import Database
from herder.store.schema import alert_channels, alert_deliveries

# A taken delivery is not due again for this long: its sender posts it within its timeout,
# or died (and then another sender tries it once this has passed).
TAKEN_SECONDS = 60.0
MAX_ERROR_LENGTH = 500


def new_delivery(
    tenant_id: str,
    channel_id: str,
    incident_id: str | None,
    event: str,
    payload: dict[str, Any],
    now: datetime,
) -> dict[str, Any]:
    return {
        "id": new_id("dlv", epoch_ms(now)), "tenant_id": tenant_id, "channel_id": channel_id,
        "incident_id": incident_id, "event": event, "state": DeliveryState.PENDING,
        "attempts": 0, "next_attempt_at": now, "history": [],
        "payload": payload, "created_at": now,
    }  # fmt: skip


@dataclass(frozen=True)
class DueDelivery:
    id: str
    attempt: int  # the number of the attempt about to be made
    url: str
    secret: str | None  # None when the channel's secret does not open here
    event: str
    payload: dict[str, Any]
    unsigned_because: str | None = None  # why the secret did not open: the attempt's error


@dataclass(frozen=True)
class AttemptOutcome:
    status: int | None
    error: str | None

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class DeliveryRepository:
    def __init__(
        self, database: Database, clock: Clock, rng: random.Random, secrets: ChannelSecrets
    ) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng
        self._secrets = secrets

    def take_due(self, limit: int) -> list[DueDelivery]:
        """Up to ``limit`` deliveries due now, each taken (its attempt counted, due again
        only after ``TAKEN_SECONDS``) by a guarded update, so two senders never post one at
        the same time."""
        now = self._clock.now()
        query = (
            select(alert_deliveries.c.id, alert_deliveries.c.attempts, alert_deliveries.c.event,
                   alert_deliveries.c.payload, alert_channels.c.url, alert_channels.c.tenant_id,
                   alert_channels.c.id.label("channel_id"), alert_channels.c.plain_secret,
                   alert_channels.c.key_id, alert_channels.c.nonce, alert_channels.c.ciphertext)
            .join(alert_channels, alert_channels.c.id == alert_deliveries.c.channel_id)
            .where(alert_deliveries.c.next_attempt_at <= now,
                   alert_deliveries.c.state == DeliveryState.PENDING,
                   alert_channels.c.kind == ChannelKind.WEBHOOK)
            .order_by(alert_deliveries.c.next_attempt_at)
            .limit(limit)
        )  # fmt: skip
        taken = []
        with self._db.write() as connection:
            for row in connection.execute(query).all():
                claimed = connection.execute(
                    update(alert_deliveries)
                    .where(and_(alert_deliveries.c.id == row.id,
                                alert_deliveries.c.attempts == row.attempts,
                                alert_deliveries.c.state == DeliveryState.PENDING))
                    .values(attempts=row.attempts + 1,
                            next_attempt_at=now + timedelta(seconds=TAKEN_SECONDS))
                ).rowcount  # fmt: skip
                if claimed:
                    taken.append(self._due(row))
        return taken

    def _due(self, row: Any) -> DueDelivery:
        payload = {**row.payload, "delivery_id": row.id}
        secret, unsigned_because = None, None
        try:
            secret = self._secrets.open(row, channel_id=row.channel_id)
        except KeyringError as error:
            unsigned_because = f"the channel's signing secret does not open: {error}"
        return DueDelivery(row.id, row.attempts + 1, row.url, secret, row.event, payload,
                           unsigned_because)  # fmt: skip

    def record(self, delivery: DueDelivery, outcome: AttemptOutcome) -> None:
        """The attempt's outcome: delivered, due again after a back-off, or failed for good
        when no attempt is left. Guarded by the attempt number: a late sender changes nothing."""
        now = self._clock.now()
        entry, values = attempt_values(delivery.attempt, outcome, now, self._rng)
        guard = and_(
            alert_deliveries.c.id == delivery.id,
            alert_deliveries.c.attempts == delivery.attempt,
            alert_deliveries.c.state == DeliveryState.PENDING,
        )
        with self._db.write() as connection:
            history = connection.execute(select(alert_deliveries.c.history).where(guard)).scalar()
            if history is None:
                return
            connection.execute(
                update(alert_deliveries).where(guard).values(history=[*history, entry], **values)
            )

    def next_due(self) -> datetime | None:
        with self._db.read() as connection:
            return connection.execute(
                select(alert_deliveries.c.next_attempt_at)
                .where(alert_deliveries.c.state == DeliveryState.PENDING)
                .order_by(alert_deliveries.c.next_attempt_at)
                .limit(1)
            ).scalar()


def attempt_values(
    attempt: int, outcome: AttemptOutcome, now: datetime, rng: random.Random
) -> tuple[dict[str, Any], dict[str, Any]]:
    """An attempt's entry in the history, and the columns it sets: delivered, due again
    after a back-off, or failed for good when no attempt is left."""
    error = None if outcome.error is None else outcome.error[:MAX_ERROR_LENGTH]
    entry = {"at": now.isoformat(), "status": outcome.status, "error": error}
    values: dict[str, Any] = {"last_status": outcome.status, "last_error": error}
    if outcome.delivered:
        values |= {"state": DeliveryState.DELIVERED, "next_attempt_at": None, "delivered_at": now}
    else:
        again = retry_at(attempt, now, rng)
        state = DeliveryState.PENDING if again is not None else DeliveryState.FAILED
        values |= {"state": state, "next_attempt_at": again}
    return entry, values
