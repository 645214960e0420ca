"""The alert loops: the evaluator opens and resolves incidents rule by rule; the sender
posts their deliveries (webhooks one by one, email and Slack channels' as messages). Two
loops, each under its own lease, so a slow receiver never delays an evaluation, and an
evaluation never delays a retry."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from herder.app.alerts import evaluate
from herder.app.notices import tell_owners
from herder.clock import Clock
from herder.control.messages import send_message, trusted
from herder.control.webhooks import Resolver, outbound_client, post, system_resolver
from herder.domain.alerts.outbound import Outbound
from herder.domain.errors import HerderError
from herder.store.alerts.deliveries import AttemptOutcome, DeliveryRepository, DueDelivery
from herder.store.alerts.messages import DueMessage, MessageRepository
from herder.store.alerts.signals import enabled_rule_ids
from herder.store.store import Store

log = logging.getLogger("herder.control")

EVALUATE_EVERY_SECONDS = 5.0
SEND_POLL_SECONDS = 5.0  # a queued delivery wakes the sender (a notice); this is the fallback
MIN_SLEEP_SECONDS = 0.05
DELIVERIES_PER_PASS = 50
MESSAGES_PER_PASS = 20  # email and Slack channels, a message each
TELL_OWNERS_EVERY = timedelta(minutes=1)  # the 24-hour notices' pass


class AlertEvaluator:
    name = "alerts"

    def __init__(self, store: Store) -> None:
        self._store = store
        self._owners_told_at: datetime | None = None

    def step(self) -> float:
        """Every enabled rule, each in its own transaction: a rule that fails is logged and
        the others still run. Once a minute, the owners of runs stopped at the 24-hour limit
        are told (``app/notices.py``)."""
        with self._store.work() as work:
            rule_ids = enabled_rule_ids(work)
        for rule_id in rule_ids:
            try:
                evaluate(self._store, rule_id)
            except HerderError as error:
                log.warning("alert rule %s: %s", rule_id, error)
        now = self._store.clock.now()
        if self._owners_told_at is None or now - self._owners_told_at >= TELL_OWNERS_EVERY:
            try:
                tell_owners(self._store)
                self._owners_told_at = now
            except HerderError as error:
                log.warning("24-hour notices: %s", error)
        return EVALUATE_EVERY_SECONDS


class AlertSender:
    name = "alert-deliveries"

    def __init__(
        self,
        deliveries: DeliveryRepository,
        clock: Clock,
        *,
        messages: MessageRepository,
        allow_private: bool,
        outbound: Outbound = Outbound(),
        resolver: Resolver = system_resolver,
    ) -> None:
        self._deliveries = deliveries
        self._messages = messages
        self._clock = clock
        self._allow_private = allow_private
        self._outbound = outbound
        self._tls = trusted(outbound)
        self._resolver = resolver

    def step(self) -> float:
        """Post the webhooks due (at most ``DELIVERIES_PER_PASS``) and send a message to
        each email or Slack channel with deliveries due (at most ``MESSAGES_PER_PASS``), all
        at once; record each outcome; the seconds until the next is due."""
        due = self._deliveries.take_due(DELIVERIES_PER_PASS)
        messages = self._messages.take_due(MESSAGES_PER_PASS)
        if due or messages:
            posted, sent = asyncio.run(self._send(due, messages))
            for delivery, outcome in zip(due, posted, strict=True):
                self._deliveries.record(delivery, outcome)
            for message, outcome in zip(messages, sent, strict=True):
                self._messages.record(message, outcome)
            if len(due) == DELIVERIES_PER_PASS or len(messages) == MESSAGES_PER_PASS:
                return 0.0
        return self._until(self._deliveries.next_due())

    async def _send(
        self, due: list[DueDelivery], messages: list[DueMessage]
    ) -> tuple[list[AttemptOutcome], list[AttemptOutcome]]:
        """All at once, so one slow receiver or relay delays none of the others."""
        now = self._clock.now()
        private, resolver = self._allow_private, self._resolver
        async with outbound_client(self._tls) as client:
            outcomes = await asyncio.gather(
                *(post(client, one, now, allow_private=private, resolver=resolver) for one in due),
                *(
                    send_message(client, one, now, outbound=self._outbound, tls=self._tls,
                                 allow_private=private, resolver=resolver)
                    for one in messages
                ),
            )  # fmt: skip
        return outcomes[: len(due)], outcomes[len(due) :]

    def _until(self, moment: datetime | None) -> float:
        if moment is None:
            return SEND_POLL_SECONDS
        wait = (moment - self._clock.now()).total_seconds()
        return min(SEND_POLL_SECONDS, max(MIN_SLEEP_SECONDS, wait))
