"""``herder autoscaler``: keeps one pool's fleet at the count the server asks for, through an
operator's scale command (docs/autoscaling.md).

Every interval it reads the pool's autoscaling (``GET /v1/pools/{pool}/autoscaling``),
decides the step (``domain.autoscaling.scale``: grow at once; shrink after demand stayed low,
draining the least busy), drains or takes back workers through the API, and calls the
command whenever what it would be told changes (and every minute, so a lost call is made
good). The command gets the decision as JSON on its standard input and as
``HERDER_POOL``, ``HERDER_DESIRED_WORKERS`` and ``HERDER_REMOVABLE_WORKERS`` (ids, space
separated): it starts workers up to the count and may stop only the removable ones, which
are drained and run nothing.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from herder.clock import Clock, SystemClock
from herder.domain.autoscaling import PoolAutoscaling, WorkerLoad, scale
from herder.domain.models import Worker

log = logging.getLogger(__name__)

COMMAND_TIMEOUT_SECONDS = 300.0
REPEAT_EVERY = timedelta(minutes=1)  # the same call again, in case the last one was lost


class AutoscalerApi(Protocol):
    """What the autoscaler calls (``HerderClient``'s methods of these names)."""

    def pool_autoscaling(self, pool: str) -> PoolAutoscaling: ...

    def list_workers(self) -> list[Worker]: ...

    def drain_worker(self, worker_id: str) -> Worker: ...

    def undrain_worker(self, worker_id: str) -> Worker: ...


@dataclass
class Autoscaler:
    api: AutoscalerApi
    pool: str
    command: str
    clock: Clock = field(default_factory=SystemClock)
    low_since: datetime | None = None  # since when fewer workers would do
    last_call: tuple[str, datetime] | None = None  # what the command was last told, when

    def step(self) -> None:
        view = self.api.pool_autoscaling(self.pool)
        now = self.clock.now()
        loads = [WorkerLoad(w.id, w.running, w.draining) for w in view.workers]
        accepting = sum(1 for load in loads if not load.draining)
        self.low_since = (self.low_since or now) if view.desired_workers < accepting else None
        step = scale(view.desired_workers, loads, self.low_since, now, view.autoscaling.policy())
        for worker_id in step.drain:
            self.api.drain_worker(worker_id)
        removable = list(step.removable)
        if view.desired_workers > accepting:  # growing: the drained ones first, if any
            for load in self._taken_back(loads, view.desired_workers - accepting):
                self.api.undrain_worker(load.id)
                removable = [worker_id for worker_id in removable if worker_id != load.id]
        self._tell(view, step.desired, removable, now)

    @staticmethod
    def _taken_back(loads: Sequence[WorkerLoad], wanted: int) -> list[WorkerLoad]:
        drained = sorted((load for load in loads if load.draining), key=lambda w: -w.running)
        return drained[:wanted]

    def _tell(
        self, view: PoolAutoscaling, desired: int, removable: list[str], now: datetime
    ) -> None:
        names = {worker.id: worker.name for worker in self.api.list_workers()}
        decision = {
            "pool": view.pool,
            "desired_workers": desired,
            "workers": [
                {**worker.model_dump(mode="json"), "name": names.get(worker.id, "")}
                for worker in view.workers
            ],
            "removable": [{"id": wid, "name": names.get(wid, "")} for wid in removable],
        }
        told = json.dumps(decision, sort_keys=True)
        if self.last_call and self.last_call[0] == told and now - self.last_call[1] < REPEAT_EVERY:
            return
        environment = {
            **os.environ,
            "HERDER_POOL": view.pool,
            "HERDER_DESIRED_WORKERS": str(desired),
            "HERDER_REMOVABLE_WORKERS": " ".join(removable),
        }
        try:
            done = subprocess.run(
                self.command, shell=True, input=told, text=True, env=environment,
                timeout=COMMAND_TIMEOUT_SECONDS, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            log.warning("the scale command ran past %ss: asked again", COMMAND_TIMEOUT_SECONDS)
            return
        if done.returncode != 0:
            log.warning("the scale command failed (exit %s): asked again", done.returncode)
            return
        log.info("pool %s: %s workers asked for, %s removable", view.pool, desired, len(removable))
        self.last_call = (told, now)
