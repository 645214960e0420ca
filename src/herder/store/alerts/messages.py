"""Email and Slack deliveries from the sender's side: a channel's due deliveries taken
together as one message, paced, and the message's outcome recorded on each of them.

read      the person channels with deliveries due, oldest first; for each, when it sent
          its messages of the last minute (deliveries share a ``delivered_at`` per message)
decide    ``domain.alerts.messages.next_message_at``: send now, or hold until then
apply     held: their ``next_attempt_at`` moves to then (no attempt counted), so that what
          comes due meanwhile joins them in the next message; taken: one guarded update
          counts an attempt on each (due again only after ``TAKEN_SECONDS``, as a webhook)
record    the outcome on every delivery of the message, each guarded by its attempt, its
          history naming the message and how many deliveries it carried
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, func, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.alerts.addresses import PEOPLE_KINDS, ChannelKind, recipients
from herder.domain.alerts.messages import MAX_DELIVERIES_PER_MESSAGE, WINDOW, next_message_at
from herder.domain.alerts.rules import DeliveryState
from herder.domain.ids import id_bound, new_id
from herder.keyring import KeyringError
from herder.store.alerts.channel_secrets import ChannelSecrets
from herder.store.alerts.deliveries import TAKEN_SECONDS, AttemptOutcome, attempt_values
from herder.store.database import Database
from herder.store.schema import alert_channels, alert_deliveries

# Deliveries sent in the last minute were made within this: ids below it are not read for
# the pace (one held longer — the sender down for a day — costs a message over the pace).
SENT_LOOKBACK = timedelta(days=1)


@dataclass(frozen=True)
class Carried:
    """A delivery a message carries."""

    id: str
    attempt: int  # the number of the attempt being made
    event: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class DueMessage:
    id: str  # msg_…: named in each carried delivery's history, and the email's Message-ID
    channel_id: str
    kind: ChannelKind
    recipients: tuple[str, ...]  # email
    url: str | None  # Slack: opened from its sealed column; None when it does not open here
    unopened_because: str | None  # why not: the attempt's error
    carried: tuple[Carried, ...]


class MessageRepository:
    def __init__(
        self, database: Database, clock: Clock, rng: random.Random, secrets: ChannelSecrets
    ) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng
        self._secrets = secrets

    def take_due(self, channels: int) -> list[DueMessage]:
        """A message for each of up to ``channels`` email or Slack channels with deliveries
        due and room in its pace; the others' due deliveries held until they have room."""
        now = self._clock.now()
        due = func.min(alert_deliveries.c.next_attempt_at)
        with self._db.write() as connection:
            channel_ids = connection.execute(
                select(alert_deliveries.c.channel_id)
                .join(alert_channels, alert_channels.c.id == alert_deliveries.c.channel_id)
                .where(alert_deliveries.c.next_attempt_at <= now,
                       alert_deliveries.c.state == DeliveryState.PENDING,
                       alert_channels.c.kind.in_(sorted(PEOPLE_KINDS)))
                .group_by(alert_deliveries.c.channel_id)
                .order_by(due)
                .limit(channels)
            ).scalars().all()  # fmt: skip
            taken = []
            for channel_id in channel_ids:
                room_at = next_message_at(_sent(connection, channel_id, now), now)
                if room_at > now:
                    _hold(connection, channel_id, now, room_at)
                    continue
                message = self._take(connection, channel_id, now)
                if message is not None:
                    taken.append(message)
        return taken

    def _take(self, connection: Connection, channel_id: str, now: datetime) -> DueMessage | None:
        channel = connection.execute(
            select(alert_channels).where(alert_channels.c.id == channel_id)
        ).one()
        due = _due(channel_id, now)
        oldest = select(alert_deliveries.c.id).where(*due).order_by(alert_deliveries.c.id)
        rows = connection.execute(
            update(alert_deliveries)
            .where(alert_deliveries.c.id.in_(oldest.limit(MAX_DELIVERIES_PER_MESSAGE)), *due)
            .values(attempts=alert_deliveries.c.attempts + 1,
                    next_attempt_at=now + timedelta(seconds=TAKEN_SECONDS))
            .returning(alert_deliveries.c.id, alert_deliveries.c.attempts,
                       alert_deliveries.c.event, alert_deliveries.c.payload)
        ).all()  # fmt: skip
        if not rows:  # another sender took them first
            return None
        carried = tuple(
            Carried(row.id, row.attempts, row.event, {**row.payload, "delivery_id": row.id})
            for row in sorted(rows, key=lambda row: str(row.id))
        )
        kind = ChannelKind(channel.kind)
        url, unopened_because = None, None
        if kind is ChannelKind.SLACK:
            try:
                url = self._secrets.open(channel)
            except KeyringError as error:
                unopened_because = f"the channel's Slack URL does not open: {error}"
        listed = tuple(recipients(channel.url)) if kind is ChannelKind.EMAIL else ()
        message_id = new_id("msg", epoch_ms(now))
        return DueMessage(message_id, channel_id, kind, listed, url, unopened_because, carried)

    def record(self, message: DueMessage, outcome: AttemptOutcome) -> None:
        """The message's outcome on each delivery it carried that is still at the attempt
        it was taken for: delivered, due again after its back-off, or failed for good."""
        now = self._clock.now()
        ids = [one.id for one in message.carried]
        with self._db.write() as connection:
            histories = dict(
                connection.execute(
                    select(alert_deliveries.c.id, alert_deliveries.c.history).where(
                        alert_deliveries.c.id.in_(ids),
                        alert_deliveries.c.state == DeliveryState.PENDING,
                    )
                ).all()
            )
            changes = []
            for one in message.carried:
                if one.id not in histories:
                    continue
                entry, values = attempt_values(one.attempt, outcome, now, self._rng)
                entry |= {"message_id": message.id, "message_deliveries": len(ids)}
                changes.append({"b_id": one.id, "b_attempt": one.attempt,
                                "history": [*histories[one.id], entry], **values})  # fmt: skip
            if changes:
                connection.execute(
                    update(alert_deliveries).where(
                        alert_deliveries.c.id == bindparam("b_id"),
                        alert_deliveries.c.attempts == bindparam("b_attempt"),
                        alert_deliveries.c.state == DeliveryState.PENDING,
                    ),
                    changes,
                )


def _due(channel_id: str, now: datetime) -> list[Any]:
    return [
        alert_deliveries.c.channel_id == channel_id,
        alert_deliveries.c.state == DeliveryState.PENDING,
        alert_deliveries.c.next_attempt_at <= now,
    ]


def _sent(connection: Connection, channel_id: str, now: datetime) -> list[datetime]:
    """When the channel's messages of the last minute were accepted: a message's deliveries
    are recorded delivered at one instant, so each distinct ``delivered_at`` is a message."""
    return list(
        connection.execute(
            select(alert_deliveries.c.delivered_at)
            .where(alert_deliveries.c.channel_id == channel_id,
                   alert_deliveries.c.id >= id_bound("dlv", epoch_ms(now - SENT_LOOKBACK)),
                   alert_deliveries.c.delivered_at > now - WINDOW)
            .distinct()
        ).scalars()
    )  # fmt: skip


def _hold(connection: Connection, channel_id: str, now: datetime, until: datetime) -> None:
    """Past its pace: what is due waits, no attempt counted, for the next message."""
    connection.execute(
        update(alert_deliveries).where(*_due(channel_id, now)).values(next_attempt_at=until)
    )
