"""``herder autoscaler``'s loop against a fake server: it tells the scale command the count
and the removable workers, drains the least busy only after demand stayed low, takes drained
workers back before asking for new ones, and does not repeat an unchanged call."""

from __future__ import annotations

import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from herder.autoscaler import Autoscaler
from herder.domain.autoscaling import AutoscalingSpec, Demand, PoolAutoscaling, ScaledWorker
from herder.domain.jobs import Capacity
from herder.domain.models import Worker, WorkerState
from tests.clocks import ManualClock

SPEC = AutoscalingSpec.model_validate(
    {"worker": {"cpu": 2, "memory_mb": 2048, "slots": 4}, "max_workers": 10,
     "scale_down_after_seconds": 300}
)  # fmt: skip
NOTHING = Demand(cpu=0, memory_mb=0, gpus=0, runs=0)
MOMENT = datetime(2027, 3, 8, 12, 0, tzinfo=UTC)


class FakeServer:
    def __init__(self) -> None:
        self.desired = 1
        self.workers: dict[str, ScaledWorker] = {}
        self.calls: list[tuple[str, str]] = []

    def pool_autoscaling(self, pool: str) -> PoolAutoscaling:
        return PoolAutoscaling(
            pool=pool, desired_workers=self.desired, workers=list(self.workers.values()),
            running=NOTHING, queued=NOTHING, forecast_peak=NOTHING, autoscaling=SPEC,
        )  # fmt: skip

    def list_workers(self) -> list[Worker]:
        return [
            Worker(
                id=worker_id,
                name=f"name-{worker_id}",
                state=WorkerState.ALIVE,
                capacity=Capacity(cpu=2, memory_mb=2048),
                max_slots=4,
                labels={},
                version="test",
                registered_at=MOMENT,
                last_heartbeat_at=MOMENT,
            )
            for worker_id in self.workers
        ]

    def drain_worker(self, worker_id: str) -> Any:
        self.calls.append(("drain", worker_id))
        self.workers[worker_id] = self.workers[worker_id].model_copy(update={"draining": True})

    def undrain_worker(self, worker_id: str) -> Any:
        self.calls.append(("undrain", worker_id))
        self.workers[worker_id] = self.workers[worker_id].model_copy(update={"draining": False})

    def add(self, worker_id: str, running: int = 0, draining: bool = False) -> None:
        self.workers[worker_id] = ScaledWorker(id=worker_id, running=running, draining=draining)


def recording(tmp_path: Path) -> tuple[str, Path]:
    """A scale command that appends what it is told (stdin and its variables) to a file."""
    told = tmp_path / "told.jsonl"
    script = (
        "import json, os, sys; decision = json.load(sys.stdin); "
        "decision['env'] = [os.environ['HERDER_POOL'], os.environ['HERDER_DESIRED_WORKERS'], "
        "os.environ['HERDER_REMOVABLE_WORKERS']]; "
        f"open({str(told)!r}, 'a').write(json.dumps(decision) + chr(10))"
    )
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}", told


def told(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_growing_is_told_at_once_and_an_unchanged_decision_is_not_repeated(
    tmp_path: Path,
) -> None:
    server, clock = FakeServer(), ManualClock(MOMENT)
    command, path = recording(tmp_path)
    autoscaler = Autoscaler(server, "cpu", command, clock)
    server.add("wrk_a", running=4)
    server.desired = 3
    autoscaler.step()
    clock.advance(5)
    autoscaler.step()  # the same: not told again within the minute
    (decision,) = told(path)
    assert decision["env"] == ["cpu", "3", ""]
    assert decision["desired_workers"] == 3
    assert decision["workers"] == [
        {"id": "wrk_a", "name": "name-wrk_a", "running": 4, "draining": False}
    ]
    clock.advance(60)
    autoscaler.step()  # a minute on: told again, in case the last call was lost
    assert len(told(path)) == 2


def test_shrinking_waits_then_drains_the_least_busy_and_offers_only_drained_idle_ones(
    tmp_path: Path,
) -> None:
    server, clock = FakeServer(), ManualClock(MOMENT)
    command, path = recording(tmp_path)
    autoscaler = Autoscaler(server, "cpu", command, clock)
    server.add("wrk_busy", running=3)
    server.add("wrk_idle")
    server.add("wrk_light", running=1)
    autoscaler.step()  # demand low from now: nothing drained yet
    assert server.calls == []
    assert told(path)[-1]["desired_workers"] == 3
    clock.advance(301)
    autoscaler.step()
    assert server.calls == [("drain", "wrk_idle"), ("drain", "wrk_light")]
    clock.advance(5)
    autoscaler.step()
    last = told(path)[-1]
    assert last["desired_workers"] == 1
    assert last["removable"] == [{"id": "wrk_idle", "name": "name-wrk_idle"}]  # light still runs
    assert last["env"][2] == "wrk_idle"


def test_growing_takes_drained_workers_back_before_asking_for_new_ones(tmp_path: Path) -> None:
    server, clock = FakeServer(), ManualClock(MOMENT)
    command, path = recording(tmp_path)
    autoscaler = Autoscaler(server, "cpu", command, clock)
    server.add("wrk_a", running=2)
    server.add("wrk_drained", running=1, draining=True)
    server.add("wrk_drained_idle", draining=True)
    server.desired = 2
    autoscaler.step()
    assert server.calls == [("undrain", "wrk_drained")]
    assert told(path)[-1]["removable"] == [
        {"id": "wrk_drained_idle", "name": "name-wrk_drained_idle"}
    ]


def test_a_failing_command_is_asked_again_next_time(tmp_path: Path) -> None:
    server, clock = FakeServer(), ManualClock(MOMENT)
    marker = tmp_path / "failed-once"
    command = f"test -e {marker} || {{ touch {marker}; exit 3; }}"
    autoscaler = Autoscaler(server, "cpu", command, clock)
    autoscaler.step()
    assert autoscaler.last_call is None
    autoscaler.step()
    assert autoscaler.last_call is not None
