"""What the scale-out and rolling-restart tests check under load, through a balancer: every
acknowledged run succeeded once, every schedule fired each instant once, the balancer kept
answering, and which processes hold the firer's partitions."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import ColumnElement, func, select

from herder.domain.states import RunState
from herder.store.schedules import PARTITIONS
from herder.store.schema import attempts, run_events, runs
from herder.store.store import Store

EVERY_FOUR_SECONDS = "*/4 * * * * *"
TERMINAL = [state.value for state in RunState if state.is_terminal]


@dataclass
class Probe:
    """``path`` through the balancer every 50 ms: what it answered."""

    url: str
    path: str = "/readyz"
    answers: list[int | str] = field(default_factory=list)

    def run(self, stopping: threading.Event) -> None:
        with httpx.Client(base_url=self.url, timeout=5) as client:
            while not stopping.wait(0.05):
                try:
                    self.answers.append(client.get(self.path).status_code)
                except httpx.TransportError as error:
                    self.answers.append(type(error).__name__)


def effect_command(effects: Path) -> str:
    """A job's side effect: its run and attempt, a line appended to a file."""
    return f'sleep 0.3; echo "$HERDER_RUN_ID $HERDER_ATTEMPT" >> {effects}'


def firer_holders(store: Store) -> set[int]:
    """The pids of the processes holding the firer's partitions."""
    holders = set()
    for partition in range(PARTITIONS):
        lease = store.leases.holder(f"firer-{partition}")
        holders.add(-1 if lease is None else int(lease[0].split(":")[1]))
    return holders


def arguments_port(process: subprocess.Popen[bytes]) -> str:
    arguments = [str(argument) for argument in process.args]  # type: ignore[union-attr]
    return f"127.0.0.1:{arguments[arguments.index('--port') + 1]}"


def count_runs(store: Store, *where: ColumnElement[bool]) -> int:
    with store.database.read() as connection:
        count: int = connection.execute(
            select(func.count()).select_from(runs).where(*where)
        ).scalar_one()
    return count


def wait_all_ended(store: Store, unfinished: ColumnElement[bool]) -> None:
    """Every run ended: however long a loaded box takes to run the backlog the fires left (up
    to 240 s), so long as runs keep ending; none ending for 60 s is a stuck run, named."""
    deadline = time.monotonic() + 240
    left, progressed = count_runs(store, unfinished), time.monotonic()
    while left:
        now = time.monotonic()
        if now > deadline or now - progressed > 60:
            with store.database.read() as connection:
                stuck = connection.execute(
                    select(runs.c.id, runs.c.state, runs.c.attempt_count, runs.c.waiting_reason)
                    .where(unfinished)
                    .limit(10)
                ).all()
            raise AssertionError(f"{left} runs never ended, e.g. {stuck}")
        time.sleep(0.2)
        now_left = count_runs(store, unfinished)
        if now_left < left:
            left, progressed = now_left, time.monotonic()


def fired_until(store: Store, schedule_ids: list[str], moment: datetime) -> bool:
    """Every schedule has made its fires due by ``moment``."""
    last = moment.replace(microsecond=0) - timedelta(seconds=moment.second % 4)
    with store.database.read() as connection:
        caught_up = connection.execute(
            select(func.count(func.distinct(runs.c.schedule_id))).where(
                runs.c.schedule_id.in_(schedule_ids), runs.c.scheduled_for == last
            )
        ).scalar_one()
    return bool(caught_up == len(schedule_ids))


def check_every_fire_once(
    store: Store, schedule_ids: list[str], since: datetime, until: datetime
) -> None:
    with store.database.read() as connection:
        rows = connection.execute(
            select(runs.c.schedule_id, runs.c.scheduled_for).where(runs.c.schedule_id.is_not(None))
        ).all()
    fires = [(schedule_id, moment) for schedule_id, moment in rows]
    assert len(fires) == len(set(fires)), "a schedule fired twice for one instant"
    first = since.replace(microsecond=0) + timedelta(seconds=4 - since.second % 4)
    instants = set()
    while first <= until:
        instants.add(first)
        first += timedelta(seconds=4)
    assert len(instants) >= 3
    for schedule_id in schedule_ids:
        missed = instants - {moment for owner, moment in fires if owner == schedule_id}
        assert not missed, f"{schedule_id} missed {sorted(missed)}"


def check_every_run_succeeded_once(
    store: Store, acknowledged: Collection[str], effects: Path
) -> None:
    """Every run succeeded, the acknowledged ones among them, each once: its side effect
    (``effect_command``) happened once for each attempt and for no run that does not exist."""
    with store.database.read() as connection:
        states = dict(connection.execute(select(runs.c.id, runs.c.state)).all())
        succeeded = connection.execute(
            select(attempts.c.run_id, attempts.c.number).where(attempts.c.state == "succeeded")
        ).all()
    lost = [run_id for run_id in acknowledged if run_id not in states]
    assert not lost, f"acknowledged runs lost: {lost[:5]}"
    unsucceeded = {run_id: state for run_id, state in states.items() if state != RunState.SUCCEEDED}
    assert not unsucceeded, f"runs that did not succeed: {_timelines(store, unsucceeded)}"
    succeeded_runs = [run_id for run_id, _ in succeeded]
    assert len(succeeded_runs) == len(set(succeeded_runs)), "a run succeeded twice"
    lines = [tuple(line.split()) for line in effects.read_text().splitlines()]
    assert len(lines) == len(set(lines)), "an attempt's side effect happened twice"
    effected = {(run_id, int(number)) for run_id, number in lines}
    assert {(run_id, number) for run_id, number in succeeded} <= effected
    extra = {run_id for run_id, _ in effected} - set(states)
    assert not extra, "a side effect of a run that does not exist"


def _timelines(store: Store, unsucceeded: dict[str, str]) -> dict[str, Any]:
    """The first few runs that did not succeed, each with its state and its events: why."""
    shown = dict(list(unsucceeded.items())[:3])
    with store.database.read() as connection:
        events = connection.execute(
            select(run_events.c.run_id, run_events.c.actor, run_events.c.message)
            .where(run_events.c.run_id.in_(sorted(shown)))
            .order_by(run_events.c.id)
        ).all()
    return {
        run_id: (
            state,
            [f"{actor}: {message}" for owner, actor, message in events if owner == run_id],
        )
        for run_id, state in shown.items()
    } | {"in all": len(unsucceeded)}
