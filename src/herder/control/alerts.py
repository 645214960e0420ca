"""The alert loops: the evaluator opens and resolves incidents rule by rule; the sender
posts their deliveries. Two loops, each under its own lease, so a slow receiver never delays
an evaluation, and an evaluation never delays a retry."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from herder.app.alerts import evaluate
from herder.clock import Clock
from herder.control.webhooks import Resolver, post_all, system_resolver
from herder.domain.errors import HerderError
from herder.store.alerts.deliveries import DeliveryRepository
from herder.store.alerts.signals import enabled_rule_ids
from herder.store.store import Store

log = logging.getLogger("herder.control")

EVALUATE_EVERY_SECONDS = 5.0
SEND_POLL_SECONDS = 5.0  # a queued delivery wakes the sender (a notice); this is the fallback
MIN_SLEEP_SECONDS = 0.05
DELIVERIES_PER_PASS = 50


class AlertEvaluator:
    name = "alerts"

    def __init__(self, store: Store) -> None:
        self._store = store

    def step(self) -> float:
        """Every enabled rule, each in its own transaction: a rule that fails is logged and
        the others still run."""
        with self._store.work() as work:
            rule_ids = enabled_rule_ids(work)
        for rule_id in rule_ids:
            try:
                evaluate(self._store, rule_id)
            except HerderError as error:
                log.warning("alert rule %s: %s", rule_id, error)
        return EVALUATE_EVERY_SECONDS


class AlertSender:
    name = "alert-deliveries"

    def __init__(
        self,
        deliveries: DeliveryRepository,
        clock: Clock,
        *,
        allow_private: bool,
        resolver: Resolver = system_resolver,
    ) -> None:
        self._deliveries = deliveries
        self._clock = clock
        self._allow_private = allow_private
        self._resolver = resolver

    def step(self) -> float:
        """Post what is due (at most ``DELIVERIES_PER_PASS``, all at once), record each
        outcome; the seconds until the next is due."""
        due = self._deliveries.take_due(DELIVERIES_PER_PASS)
        if due:
            posting = post_all(
                due, self._clock.now(), allow_private=self._allow_private, resolver=self._resolver
            )
            outcomes = asyncio.run(posting)
            for delivery, outcome in zip(due, outcomes, strict=True):
                self._deliveries.record(delivery, outcome)
            if len(due) == DELIVERIES_PER_PASS:
                return 0.0
        return self._until(self._deliveries.next_due())

    def _until(self, moment: datetime | None) -> float:
        if moment is None:
            return SEND_POLL_SECONDS
        wait = (moment - self._clock.now()).total_seconds()
        return min(SEND_POLL_SECONDS, max(MIN_SLEEP_SECONDS, wait))
