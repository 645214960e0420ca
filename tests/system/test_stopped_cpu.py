"""A stopped attempt's CPU, charged on real workers, sandboxed or not: a cancel or a hard
budget kills a tree of CPU burners (one that left the group, two whose parent never waits
for them), and what each burner says it burned is charged, so a hard budget once spent
stops the run for good instead of placing it again."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from herder.client import HerderClient
from herder.domain.budgets import Budget, Period, TenantBudgets
from herder.domain.usage import UsageGroup
from tests.system.conftest import ISOLATIONS, Cluster, wait_until

pytestmark = pytest.mark.system

# Each burner prints, as it burns, the CPU time it has used: its last line is a lower bound
# of what it burned before it was killed. The job's first process dies at SIGTERM; of its
# children, one left the group (setsid) and is killed at the end, and a supervisor that
# ignores SIGTERM and SIGCHLD (so the kernel reaps its children, and no wait4 sees them)
# runs two that die at SIGTERM.
TREE = """
import os, signal, time
def burn():
    while True:
        for _ in range(100000):
            pass
        used = os.times()
        print(f"burner {os.getpid()} {used.user + used.system:.3f}", flush=True)
def child(setup=lambda: None):
    if os.fork() == 0:
        setup()
        burn()
child(os.setsid)
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for _ in range(2):
        child(lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    while True:
        time.sleep(60)
while True:
    time.sleep(60)
"""
BURNERS = 3


def _spec(stop_grace_seconds: int) -> dict[str, object]:
    command = f"exec python3 -c '{TREE}'"
    return {"runtime": "shell", "command": command, "stop_grace_seconds": stop_grace_seconds}


def _burned(herder: HerderClient, run_id: str, attempt: int | None = None) -> dict[str, float]:
    """Each burner's last word on its CPU time, by pid."""
    text = "".join(chunk.text for chunk in herder.logs(run_id, attempt=attempt).chunks)
    return {pid: float(seconds) for pid, seconds in re.findall(r"burner (\d+) ([\d.]+)", text)}


def _wait_for_burners(herder: HerderClient, run_id: str) -> None:
    wait_until(
        lambda: len(burned := _burned(herder, run_id)) == BURNERS
        and min(burned.values()) >= 0.3,
        120, "every burner burned 0.3 s",
    )  # fmt: skip


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_cancelled_attempt_is_charged_the_cpu_of_every_process_it_killed(
    start_cluster: Callable[..., Cluster], isolation: str
) -> None:
    cluster = start_cluster()
    cluster.start_worker("w", "--isolation", isolation)
    with cluster.client() as herder:
        run = herder.start_run(herder.create_job("burn", _spec(stop_grace_seconds=1)).id)
        _wait_for_burners(herder, run.id)
        herder.cancel_run(run.id)
        finished = herder.wait(run.id, timeout=30)
        truth = sum(_burned(herder, run.id).values())
        (attempt,) = finished.attempts
        charged = (attempt.cpu_user_seconds or 0.0) + (attempt.cpu_system_seconds or 0.0)
        assert (finished.state, attempt.state) == ("cancelled", "cancelled")
        assert charged >= 0.8 * truth, f"charged {charged:.3f} CPU-s of {truth:.3f} burned"
        (row,) = herder.usage(group_by=UsageGroup.JOB).rows
        assert row.cpu_seconds == pytest.approx(charged)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_spent_hard_budget_stops_the_run_once_and_holds_it(
    start_cluster: Callable[..., Cluster], isolation: str
) -> None:
    cluster = start_cluster()
    cluster.start_worker("w", "--isolation", isolation)
    with cluster.client() as herder:
        run = herder.start_run(herder.create_job("burn", _spec(stop_grace_seconds=0)).id)
        _wait_for_burners(herder, run.id)
        # spent by the time it runs (its 1 core's request), and by what it burned (0.9 s)
        budget = Budget(period=Period.DAY, cpu_seconds=0.5, hard=True)
        (tenant,) = herder.list_tenants().items
        herder.set_budgets(tenant.id, TenantBudgets(budgets=(budget,)))
        wait_until(
            lambda: "day budget is spent" in (herder.get_run(run.id).waiting_reason or ""),
            60, "the run waits on the spent budget",
        )  # fmt: skip
        held = herder.get_run(run.id)
        assert held.state == "queued"
        assert len(held.attempts) == 1, "placed again on a budget that looked unspent"
        (attempt,) = held.attempts
        charged = (attempt.cpu_user_seconds or 0.0) + (attempt.cpu_system_seconds or 0.0)
        truth = sum(_burned(herder, run.id, attempt=1).values())
        assert charged >= 0.8 * truth, f"charged {charged:.3f} CPU-s of {truth:.3f} burned"
