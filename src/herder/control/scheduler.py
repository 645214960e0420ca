"""``herder scheduler``: the control loops of one process — the dispatcher, the reaper, the
alerts' and one cron firer per schedule partition — each in a thread under its lease.

Several schedulers may run against one PostgreSQL; each loop runs in one of them at a time and
a standby takes over within the lease time when the holder dies. The schedulers are members
of a pool (``Membership``) and all loops but the dispatcher spread over them by rendezvous
hashing, moving when one joins or leaves; the dispatcher stays where it is, with its warm view
of the fleet, until that process goes. Placement partitioned (``HERDER_DISPATCH_PARTITIONS``:
each partition's dispatcher places its pools) spreads and moves its partitions like the
others. ``herder up`` runs the same loops inside its own
process.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import socket
import threading
from datetime import timedelta

from herder.control.alerts import AlertEvaluator, AlertSender
from herder.control.checkpoint_sweeper import CheckpointSweeper
from herder.control.compactor import LogCompactor
from herder.control.dispatcher import Dispatcher
from herder.control.firer import Firer
from herder.control.leased import LeasedLoop, Loop
from herder.control.maintenance import Maintenance
from herder.control.membership import Membership
from herder.control.reaper import Reaper
from herder.control.starter import Starter
from herder.control.statistics import StatisticsKeeper
from herder.domain.alerts.outbound import Outbound
from herder.domain.errors import HerderError
from herder.domain.placement.partitions import partitions
from herder.domain.schedules import MISFIRE_GRACE
from herder.settings import DEFAULT_LOST_WORKER_RETENTION_HOURS, Settings
from herder.store.notifications import (
    ALERTS_CHANNEL,
    CAPACITY,
    DUE_CHANNEL,
    HANDED,
    WORK_CHANNEL,
    listener_for,
)
from herder.store.schedules import PARTITIONS
from herder.store.statistics import TableStatistics
from herder.store.store import Store

log = logging.getLogger("herder.control")

DEFAULT_LEASE_SECONDS = 10.0


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Scheduler:
    def __init__(
        self,
        store: Store,
        *,
        heartbeat_timeout_seconds: float,
        lost_worker_retention_hours: float = DEFAULT_LOST_WORKER_RETENTION_HOURS,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        misfire_grace_seconds: float = MISFIRE_GRACE.total_seconds(),
        listen: bool = True,
        alert_private_targets: bool = False,
        outbound: Outbound = Outbound(),
        dispatch_partitions: int = 1,
    ) -> None:
        self.holder = holder_name()
        self._leases = store.leases
        self._stop = threading.Event()
        self._leaving = threading.Event()  # ends the heartbeat, before ``_stop`` ends the loops
        dispatchers = [
            Dispatcher(store.placement, partition=partition)
            for partition in partitions(dispatch_partitions)
        ]
        reaper = Reaper(store, store.clock, heartbeat_timeout_seconds=heartbeat_timeout_seconds)
        starter = Starter(store)
        grace = timedelta(seconds=misfire_grace_seconds)
        firers = [
            Firer(store, store.clock, partition, misfire_grace=grace)
            for partition in range(PARTITIONS)
        ]
        compactor = LogCompactor(store.log_compaction)
        sender = AlertSender(
            store.alert_deliveries, store.clock, messages=store.alert_messages,
            allow_private=alert_private_targets, outbound=outbound,
        )  # fmt: skip
        maintenance = Maintenance(
            store.history,
            partitioned=store.database.is_postgres,
            expiring=(
                store.events.prune,
                store.hooks.prune,
                store.workflow_runs.forget_ended_waits,
                functools.partial(
                    store.fleet.forget_lost, timedelta(hours=lost_worker_retention_hours)
                ),
            ),
        )
        sweeper = CheckpointSweeper(store.checkpoints)
        bodies: list[Loop] = [*dispatchers, reaper, starter, *firers, compactor,
                              AlertEvaluator(store), maintenance, sender, sweeper]  # fmt: skip
        if store.database.is_postgres:
            bodies.append(StatisticsKeeper(TableStatistics(store.database)))
        wakes = {loop.name: threading.Event() for loop in bodies}
        self._wakes = list(wakes.values())
        # Who a notice wakes; the alert evaluator and the maintenance keep their own clocks.
        # new work or freed capacity (every partition: a notice does not say whose)
        self._wake_on_work = [wakes[dispatcher.name] for dispatcher in dispatchers]
        woken_when_due: list[Loop] = [reaper, starter, *firers]
        self._wake_on_due = [wakes[loop.name] for loop in woken_when_due]
        # an attempt ended: its log to compact, maybe its run's checkpoint to delete
        self._wake_on_ended = [wakes[compactor.name], wakes[sweeper.name]]
        self._wake_on_alert = wakes[sender.name]  # a delivery was queued
        self.membership = Membership(
            store.leases, self.holder, ttl_seconds=lease_seconds, stop=self._leaving
        )
        # one dispatcher keeps its warm fleet view where it is; partitions spread and move
        whole_dispatcher = dispatchers[0] if dispatch_partitions == 1 else None
        self.loops = [
            LeasedLoop(
                loop.name, store.leases, self.holder, loop.step,
                ttl_seconds=lease_seconds, wake=wake, stop=self._stop,
                placement=None if loop is whole_dispatcher else self.membership,
                on_held=reaper.held if loop is reaper else None,
            )
            for loop, wake in zip(bodies, self._wakes, strict=True)
        ]  # fmt: skip
        store.database.subscribe(self._on_notice)
        # A scheduler in its own process hears other processes' notices itself; inside
        # ``herder up`` the API's listener (PostgreSQL) or the store (SQLite) delivers them.
        self._listener = listener_for(store.database) if listen else None
        self._membership_thread = threading.Thread(
            target=self.membership.run, name="membership", daemon=True
        )
        self._threads = [
            threading.Thread(target=loop.run, name=f"loop-{loop.name}", daemon=True)
            for loop in self.loops
        ]

    def _on_notice(self, channel: str, payload: str) -> None:
        if payload.startswith((f"{CAPACITY}:", f"{HANDED}:")):  # an attempt ended
            for wake in self._wake_on_ended:
                wake.set()
        if channel == DUE_CHANNEL:
            for wake in self._wake_on_due:
                wake.set()
        elif channel == WORK_CHANNEL or payload.startswith(f"{CAPACITY}:"):
            for wake in self._wake_on_work:
                wake.set()
        elif channel == ALERTS_CHANNEL:
            self._wake_on_alert.set()

    def start(self) -> None:
        if self._listener is not None:
            self._listener.start()
        self.membership.refresh()  # before the loops' first takes, so that they spread at once
        self._membership_thread.start()
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Leave the pool, then let the loops go, then any lease handed here and not yet
        taken: none is left naming this process, unheld until it expires (once it has left,
        ``hand_over`` names it no more, so no survivor hands one back)."""
        self._leaving.set()
        self._membership_thread.join(timeout=10)
        self.membership.leave()
        self._stop.set()
        for wake in self._wakes:
            wake.set()
        for thread in self._threads:
            thread.join(timeout=10)
        try:
            self._leases.release_all(self.holder)
        except HerderError as error:  # they will expire by themselves
            log.warning("could not release the leases handed to %s: %s", self.holder, error)
        if self._listener is not None:
            self._listener.stop()

    def wait(self) -> None:
        """Block until ``stop`` (from a signal handler)."""
        self._stop.wait()


def start_scheduler(settings: Settings, store: Store, *, listen: bool) -> Scheduler:
    scheduler = Scheduler(
        store,
        heartbeat_timeout_seconds=settings.heartbeat_timeout_seconds,
        lost_worker_retention_hours=settings.lost_worker_retention_hours,
        lease_seconds=settings.lease_seconds,
        misfire_grace_seconds=settings.misfire_grace_seconds,
        listen=listen,
        alert_private_targets=settings.allow_private_alert_targets,
        outbound=settings.outbound,
        dispatch_partitions=settings.dispatch_partitions,
    )
    scheduler.start()
    return scheduler
