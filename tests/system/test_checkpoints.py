"""A job that keeps its count in ``$HERDER_CHECKPOINT_DIR`` reaches 1,000 exactly once, on
real workers, across everything that stops an attempt before its end: a preemption by a
higher class, a ``kill -9`` of its worker (another worker resumes it from the last interval's
save) and a suspend and resume. A job that keeps nothing there starts again from zero, as
before checkpoints."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from herder.client import HerderClient
from herder.client.errors import ApiError
from herder.domain.models import RunDetail
from tests.system.conftest import Cluster, wait_until

# Counts to 1,000, keeping its count in the checkpoint directory (written whole, then renamed:
# a save taken while it runs sees the old count or the new one, never half of one). At SIGTERM
# it says where it stopped; every attempt says where it started. Its pace leaves the test
# time for what it does to the first three attempts; the fourth, after them all, counts on
# without a pause (at 0.03 s a number, its rest took about 15 s).
COUNTER = r"""
n=$(cat "$HERDER_CHECKPOINT_DIR/count" 2>/dev/null || echo 0)
echo "attempt $HERDER_ATTEMPT from $n"
pause=0.03
[ "$HERDER_ATTEMPT" -ge 4 ] && pause=0
# saved at SIGTERM too: a TERM between the count and its save would leave the file one short
save() { echo "$n" > "$HERDER_CHECKPOINT_DIR/count"; }
trap 'save; echo "attempt $HERDER_ATTEMPT stopped at $n"; exit 143' TERM
while [ "$n" -lt 1000 ]; do
  n=$((n + 1))
  echo "$n"
  echo "$n" > "$HERDER_CHECKPOINT_DIR/count.new"
  mv "$HERDER_CHECKPOINT_DIR/count.new" "$HERDER_CHECKPOINT_DIR/count"
  [ "$n" -eq 1000 ] && echo "reached 1000"
  sleep "$pause"
done
"""
COUNTER_SPEC = {
    "runtime": "shell",
    "command": COUNTER,
    "priority": "low",
    "preemptible": True,
    "stop_grace_seconds": 10,
    "checkpoint_interval_seconds": 10,
    "checkpoint_mb": 1,
    "retry": {"max_attempts": 3, "initial_delay_seconds": 0},
}
HEARTBEAT_TIMEOUT = 3.0


def _printed(herder: HerderClient, run_id: str, attempt: int) -> list[str]:
    return "".join(c.text for c in herder.logs(run_id, attempt=attempt).chunks).splitlines()


def _counted(herder: HerderClient, run_id: str, attempt: int) -> int:
    """The last number attempt ``attempt`` printed (0 before its first)."""
    numbers = [int(line) for line in _printed(herder, run_id, attempt) if line.isdigit()]
    return numbers[-1] if numbers else 0


def _running(herder: HerderClient, run_id: str, attempt: int, past: int) -> bool:
    run = herder.get_run(run_id)
    return (
        run.state == "running"
        and run.attempt_count == attempt
        and _counted(herder, run_id, attempt) > past
    )


def _saved_by(herder: HerderClient, run_id: str) -> int | None:
    try:
        return herder.get_checkpoint(run_id).attempt
    except ApiError:
        return None


def _started_from(herder: HerderClient, run_id: str, attempt: int) -> int:
    first = _printed(herder, run_id, attempt)[0]
    assert first.startswith(f"attempt {attempt} from "), first
    return int(first.rsplit(" ", 1)[1])


@pytest.mark.timeout(480)  # above the sum of its waits: a loaded box may need them all
def test_a_count_to_1000_survives_preemption_a_killed_worker_and_a_suspend(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster(fast=True)
    first = cluster.start_worker(
        "first", "--cpu", "1", "--max-slots", "1", "--max-stop-grace", "10"
    )
    with cluster.client() as herder:
        counter = herder.create_job("counter", COUNTER_SPEC)
        urgent = herder.create_job("urgent", {"runtime": "shell", "command": "echo urgent",
                                              "priority": "high"})  # fmt: skip
        run = herder.start_run(counter.id)

        # 1. preempted by a higher class: it saves at SIGTERM and goes on from there
        wait_until(lambda: _running(herder, run.id, 1, 50), 30, "attempt 1 counting")
        assert herder.wait(herder.start_run(urgent.id).id, timeout=60).state == "succeeded"
        wait_until(lambda: _running(herder, run.id, 2, 0), 30, "attempt 2 counting")
        stopped_at = _counted(herder, run.id, 1)
        assert f"attempt 1 stopped at {stopped_at}" in _printed(herder, run.id, 1)
        assert _started_from(herder, run.id, 2) == stopped_at

        # 2. its worker killed: another resumes it from the last interval's save
        wait_until(lambda: _saved_by(herder, run.id) == 2, 30, "attempt 2 saved on its interval")
        second = cluster.start_worker("second", "--max-stop-grace", "10")
        wait_until(lambda: len(herder.list_workers()) == 2, 30, "the second worker registered")
        first.kill()
        last_seen = _counted(herder, run.id, 2)
        wait_until(lambda: _running(herder, run.id, 3, 0), HEARTBEAT_TIMEOUT + 30, "attempt 3")
        resumed_from = _started_from(herder, run.id, 3)
        assert stopped_at < resumed_from <= last_seen

        # 3. suspended: it saves, frees its worker, holds nothing; resumed, it goes on
        wait_until(lambda: _running(herder, run.id, 3, resumed_from + 20), 30, "attempt 3 on")
        herder.suspend_run(run.id)
        wait_until(lambda: herder.get_run(run.id).state == "suspended", 30, "suspended")
        (worker,) = [w for w in herder.list_workers() if w.name == "second"]
        assert worker.in_use is None or worker.in_use.slots == 0
        suspended_at = _counted(herder, run.id, 3)
        assert f"attempt 3 stopped at {suspended_at}" in _printed(herder, run.id, 3)
        herder.resume_run(run.id)
        finished: RunDetail = herder.wait(run.id, timeout=120)
        assert _started_from(herder, run.id, 4) == suspended_at

        everything = [line for a in (1, 2, 3, 4) for line in _printed(herder, run.id, a)]
    assert finished.state == "succeeded"
    assert [a.state for a in finished.attempts] == ["preempted", "lost", "preempted", "succeeded"]
    assert everything.count("reached 1000") == 1
    assert everything.count("1000") == 1
    second.kill()


def test_a_job_that_keeps_no_checkpoint_starts_again_from_zero(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster()
    cluster.start_worker("only", "--cpu", "1", "--max-slots", "1")
    command = 'echo "attempt $HERDER_ATTEMPT"; [ "$HERDER_ATTEMPT" = 1 ] && exec sleep 60; true'
    with cluster.client() as herder:
        low = herder.create_job("plain", {"runtime": "shell", "command": command,
                                          "priority": "low", "preemptible": True})  # fmt: skip
        urgent = herder.create_job("urgent", {"runtime": "shell", "command": "true",
                                              "priority": "high"})  # fmt: skip
        run = herder.start_run(low.id)
        wait_until(lambda: herder.get_run(run.id).state == "running", 30, "running")
        herder.start_run(urgent.id)
        finished = herder.wait(run.id, timeout=60)
        assert _saved_by(herder, run.id) is None
    assert [a.state for a in finished.attempts] == ["preempted", "succeeded"]
