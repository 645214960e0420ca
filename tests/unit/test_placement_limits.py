"""Placement with limits by key: a key at its ``max_running`` or with its rate spent holds its
runs back with a reason naming the limit and the key; other keys' runs go past them; the
keys of a limit take turns; a gang counts once; a deleted limit binds no more."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from herder.domain.placement.policy import plan
from herder.domain.placement.snapshot import (
    KeyStarts,
    LimitView,
    QueuedRun,
    RunningAttempt,
    Snapshot,
    TenantView,
    WorkerView,
)
from herder.domain.tenants import TenantQuotas
from tests.unit.placement_snapshots import NOW, queued, running, worker

PARTNER = LimitView("lim_partner", "partner-api", max_running=1)


def keyed(name: str, key: str, limit: str = "lim_partner", **fields: object) -> QueuedRun:
    return replace(queued(name, **fields), limit_keys=((limit, key),))  # type: ignore[arg-type]


def running_keyed(name: str, key: str, limit: str = "lim_partner") -> RunningAttempt:
    return replace(running(name), limit_keys=((limit, key),))


def snapshot(
    *runs: QueuedRun,
    workers: tuple[WorkerView, ...] = (worker("w1"),),
    limits: tuple[LimitView, ...] = (PARTNER,),
    **fields: object,
) -> Snapshot:
    return Snapshot(
        NOW,
        runs,
        workers,
        limits={limit.id: limit for limit in limits},
        **fields,  # type: ignore[arg-type]
    )


def placed(snap: Snapshot) -> list[str]:
    return [placement.run_id for placement in plan(snap).placements]


def test_a_key_at_its_max_running_holds_its_runs_and_lets_other_keys_past() -> None:
    decided = plan(
        snapshot(
            keyed("acme-1", "acme", waited=30),
            keyed("acme-2", "acme", waited=20),
            keyed("beta-1", "beta", waited=10),
        )
    )
    assert [p.run_id for p in decided.placements] == ["acme-1", "beta-1"]
    assert decided.waiting["acme-2"].endswith("limit partner-api, key acme: 1 of 1 running")


def test_running_runs_count_against_their_key() -> None:
    busy = worker("w1", running=(running_keyed("acme-0", "acme"),))
    decided = plan(snapshot(keyed("acme-1", "acme"), keyed("beta-1", "beta"), workers=(busy,)))
    assert [p.run_id for p in decided.placements] == ["beta-1"]
    assert "key acme: 1 of 1 running" in decided.waiting["acme-1"]


def test_a_gang_counts_once_against_its_key() -> None:
    gang = tuple(
        replace(running_keyed("acme-0", "acme"), attempt_id=f"a{rank}") for rank in range(3)
    )
    three = replace(PARTNER, max_running=2)
    busy = worker("w1", running=gang)
    assert placed(snapshot(keyed("acme-1", "acme"), workers=(busy,), limits=(three,))) == ["acme-1"]


def test_a_spent_rate_holds_the_key_until_its_oldest_start_leaves_the_window() -> None:
    rated = LimitView("lim_partner", "partner-api", rate_count=10, rate_period_seconds=60)
    oldest = NOW - timedelta(seconds=45)
    decided = plan(
        snapshot(
            keyed("acme-1", "acme"),
            keyed("beta-1", "beta"),
            limits=(rated,),
            limit_starts={("lim_partner", "acme"): KeyStarts(10, oldest)},
        )
    )
    assert [p.run_id for p in decided.placements] == ["beta-1"]
    assert decided.waiting["acme-1"].endswith(
        "limit partner-api, key acme: 10/min used, next start at 12:00:15 UTC"
    )
    assert decided.placements[0].rate_keys == (("lim_partner", "beta"),)


def test_a_rate_counts_the_starts_of_the_pass_itself() -> None:
    rated = LimitView("lim_partner", "partner-api", rate_count=3, rate_period_seconds=3600)
    runs = [keyed(f"acme-{n}", "acme", waited=10 - n) for n in range(4)]
    decided = plan(
        snapshot(
            *runs,
            limits=(rated,),
            limit_starts={("lim_partner", "acme"): KeyStarts(1, NOW - timedelta(minutes=5))},
        )
    )
    assert [p.run_id for p in decided.placements] == ["acme-0", "acme-1"]
    assert "3/h used" in decided.waiting["acme-2"]


def test_keys_take_turns_however_old_a_busy_keys_backlog_is() -> None:
    roomy = replace(PARTNER, max_running=100)
    backlog = [keyed(f"acme-{n}", "acme", waited=100 - n) for n in range(5)]
    small = worker("w1", cpu=2, slots=2)
    assert placed(
        snapshot(*backlog, keyed("beta-1", "beta", waited=1), workers=(small,), limits=(roomy,))
    ) == [
        "acme-0",
        "beta-1",
    ]


def test_a_held_run_takes_no_place_in_its_tenants_queued_window() -> None:
    quotas = TenantQuotas(max_queued=2)
    decided = plan(
        snapshot(
            keyed("acme-1", "acme", waited=40),
            keyed("acme-2", "acme", waited=30),
            keyed("acme-3", "acme", waited=20),
            keyed("beta-1", "beta", waited=10),
            workers=(worker("w1", running=(running_keyed("acme-0", "acme"),)),),
            tenants={"t1": TenantView("t1", quotas=quotas)},
        )
    )
    assert [p.run_id for p in decided.placements] == ["beta-1"]


def test_a_deleted_limit_binds_its_runs_no_more() -> None:
    assert placed(snapshot(keyed("acme-1", "acme"), keyed("acme-2", "acme"), limits=())) == [
        "acme-1",
        "acme-2",
    ]


def test_runs_without_keys_are_not_held() -> None:
    busy = worker("w1", running=(running_keyed("acme-0", "acme"),))
    assert placed(snapshot(queued("plain"), workers=(busy,))) == ["plain"]
