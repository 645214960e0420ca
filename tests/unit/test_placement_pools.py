"""Placement with resource pools: a run goes only to its pool's workers, if its tenant may use
the pool; within its tenant's nominal share it is its own, past it a preemptible run borrows
idle room, marked borrowed; a tenant below its share reclaims from other tenants' borrowed
work only, and priority preemption never takes another tenant's work within its share."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from herder.domain.placement.policy import plan
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import (
    PoolView,
    QueuedRun,
    RunningAttempt,
    Snapshot,
    WorkerView,
)
from herder.domain.placement.timeline import ForPriority, Reclaim
from herder.domain.pools import PoolSelectors
from tests.unit.placement_snapshots import NOW, queued, running, worker

HIGH, LOW = 2, 0


def gpu_pool(**shares: int) -> dict[str, PoolView]:
    """Pool a100: each tenant's nominal share in GPUs."""
    return {"a100": PoolView("a100", {t: Amount(0, 0, gpus, 0) for t, gpus in shares.items()})}


def box(
    name: str, *attempts: RunningAttempt, gpus: int = 4, pool: str | None = "a100"
) -> WorkerView:
    return replace(worker(name, gpus=gpus, running=attempts), pool=pool)


def wants(
    name: str, tenant: str, gpus: int = 1, preemptible: bool = True, **fields: Any
) -> QueuedRun:
    return replace(
        queued(name, tenant=tenant, gpus=gpus, **fields), pool="a100", preemptible=preemptible
    )


def borrowed(name: str, tenant: str, gpus: int = 1, **fields: Any) -> RunningAttempt:
    return replace(running(name, tenant=tenant, gpus=gpus, **fields), borrowed=True)


def snapshot(
    queue: list[QueuedRun], workers: list[WorkerView], pools: dict[str, PoolView]
) -> Snapshot:
    return Snapshot(now=NOW, queued=tuple(queue), workers=tuple(workers), pools=pools)


def test_a_run_goes_only_to_its_pools_workers_and_one_naming_none_to_the_shared_fleet() -> None:
    shared = replace(worker("shared", gpus=4), pool=None)
    decided = plan(snapshot([wants("pooled", "ml"), queued("plain", tenant="ml")],
                            [shared, box("gpu-box")], gpu_pool(ml=2)))  # fmt: skip
    where = {p.run_id: p.members[0].worker_id for p in decided.placements}
    assert where == {"pooled": "gpu-box", "plain": "shared"}


def test_a_missing_pool_or_one_the_tenant_has_no_share_of_holds_its_runs_with_a_reason() -> None:
    gone = replace(queued("gone", tenant="ml"), pool="h100")
    stranger = wants("stranger", "web")
    decided = plan(snapshot([gone, stranger], [box("gpu-box")], gpu_pool(ml=2)))
    assert decided.placements == []
    assert "pool h100 does not exist" in decided.waiting["gone"]
    assert "tenant web may not use pool a100" in decided.waiting["stranger"]


def test_within_its_share_a_run_is_its_own_and_past_it_borrows_idle_room() -> None:
    queue = [wants("first", "ml"), wants("second", "ml"), wants("third", "ml")]
    decided = plan(snapshot(queue, [box("gpu-box")], gpu_pool(ml=2, web=2)))
    borrowing = {p.run_id: p.borrowed for p in decided.placements}
    assert borrowing == {"first": False, "second": False, "third": True}


def test_a_run_that_may_not_be_preempted_never_borrows() -> None:
    queue = [wants("mine", "ml", gpus=2), wants("more", "ml", preemptible=False)]
    decided = plan(snapshot(queue, [box("gpu-box")], gpu_pool(ml=2, web=2)))
    assert [p.run_id for p in decided.placements] == ["mine"]
    assert "uses 2 of its nominal 2 GPUs in pool a100" in decided.waiting["more"]
    assert "only a preemptible run borrows" in decided.waiting["more"]


def test_runs_within_their_share_go_before_runs_that_would_borrow() -> None:
    full = box("gpu-box", running("ml-own", tenant="ml", gpus=2), gpus=3)
    queue = [wants("ml-more", "ml", waited=600), wants("web-own", "web")]
    decided = plan(snapshot(queue, [full], gpu_pool(ml=2, web=1)))
    assert [p.run_id for p in decided.placements] == ["web-own"]  # though ml's waited longer
    assert "none is idle to borrow" in decided.waiting["ml-more"]


def test_a_tenant_below_its_share_reclaims_borrowed_work_only_whatever_its_class() -> None:
    full = box(
        "gpu-box",
        borrowed("web-borrowed", "web", priority=HIGH),
        running("web-own", tenant="web", gpus=2, priority=LOW),
        running("ml-own", tenant="ml", gpus=1, priority=LOW),
    )
    decided = plan(snapshot([wants("ml-wants", "ml", priority=LOW)], [full], gpu_pool(ml=2, web=2)))
    assert [(p.run_id, p.cause) for p in decided.preemptions] == [
        ("web-borrowed", Reclaim("ml-wants", "ml", "a100"))  # not a class above it: a share
    ]
    assert (
        "reclaiming its share in pool a100: preempting 1 borrowed run"
        in decided.waiting["ml-wants"]
    )


def test_a_gang_within_its_share_reclaims_room_for_every_member_across_workers() -> None:
    left = box("left", borrowed("web-1", "web"), running("web-own", tenant="web", gpus=1), gpus=2)
    right = box("right", borrowed("web-2", "web"), running("ml-own", tenant="ml", gpus=1), gpus=2)
    gang = wants("ml-gang", "ml", replicas=2)
    decided = plan(snapshot([gang], [left, right], gpu_pool(ml=3, web=1)))
    assert sorted(p.run_id for p in decided.preemptions) == ["web-1", "web-2"]
    assert {p.worker_id for p in decided.preemptions} == {"left", "right"}
    assert {p.cause for p in decided.preemptions} == {Reclaim("ml-gang", "ml", "a100")}
    assert decided.waiting["ml-gang"].endswith(
        "reclaiming its share in pool a100: preempting 2 borrowed runs on left, right "
        "(web-1, web-2); its gang starts when they stop"
    )


def test_a_gang_reclaims_for_all_its_members_or_stops_nothing() -> None:
    left = box("left", borrowed("web-1", "web"), running("web-own", tenant="web", gpus=1), gpus=2)
    right = box(
        "right",
        running("web-own-2", tenant="web", gpus=1),
        running("ml-own", tenant="ml", gpus=1),
        gpus=2,
    )
    gang = wants("ml-gang", "ml", replicas=2)
    decided = plan(snapshot([gang], [left, right], gpu_pool(ml=3, web=2)))
    assert decided.preemptions == []  # web-1 alone would make room for one member only
    assert "none has room for all its members now" in decided.waiting["ml-gang"]


def test_two_members_on_one_worker_each_get_their_own_victims() -> None:
    full = box("box", borrowed("web-1", "web"), borrowed("web-2", "web"), borrowed("web-3", "web"),
               running("ml-own", tenant="ml", gpus=1))  # fmt: skip
    gang = wants("ml-gang", "ml", replicas=2)
    decided = plan(snapshot([gang], [full], gpu_pool(ml=3, web=0)))
    assert len(decided.preemptions) == 2  # one member's room each, not three stopped


def test_nothing_borrowed_means_nothing_reclaimed_and_a_borrower_waits() -> None:
    full = box("gpu-box", running("web-own", tenant="web", gpus=4, priority=LOW))
    decided = plan(snapshot([wants("ml-wants", "ml")], [full], gpu_pool(ml=0, web=4)))
    assert decided.preemptions == []
    assert "borrow" in decided.waiting["ml-wants"]


def test_priority_preemption_in_a_pool_never_takes_another_tenants_work_within_its_share() -> None:
    full = box(
        "gpu-box",
        running("web-own", tenant="web", gpus=2, priority=LOW),
        running("ml-low", tenant="ml", gpus=2, priority=LOW),
    )
    urgent = wants("urgent", "ml", gpus=2, priority=HIGH)
    decided = plan(snapshot([urgent], [full], gpu_pool(ml=4, web=2)))
    assert [(p.run_id, p.cause) for p in decided.preemptions] == [
        ("ml-low", ForPriority("urgent", HIGH, LOW))  # its own tenant's, not web's
    ]


def test_a_gang_places_every_member_in_its_pool_or_none() -> None:
    gang = wants("gang", "ml", gpus=2, replicas=5)  # 10 GPUs: more than a and b hold
    decided = plan(snapshot([gang], [box("a"), box("b"), box("c", pool=None)], gpu_pool(ml=12)))
    assert decided.placements == []
    assert "gang" in decided.waiting["gang"]
    decided = plan(snapshot([gang], [box("a"), box("b"), box("c")], gpu_pool(ml=12)))
    assert {member.worker_id for member in decided.placements[0].members} == {"a", "b", "c"}


def test_without_pools_nothing_changes() -> None:
    decided = plan(Snapshot(now=NOW, queued=(queued("plain"),), workers=(worker("w"),)))
    assert [(p.run_id, p.borrowed) for p in decided.placements] == [("plain", False)]


def test_runs_of_one_shape_in_two_pools_each_find_their_own_pools_workers() -> None:
    pools = {name: PoolView(name, {"ml": Amount(0, 0, 4, 0)}) for name in ("a", "b")}
    first = replace(queued("in-a", tenant="ml", gpus=4), pool="a")
    second = replace(queued("in-b", tenant="ml", gpus=4), pool="b")
    decided = plan(
        snapshot([first, second], [box("box-a", pool="a"), box("box-b", pool="b")], pools)
    )
    where = {p.run_id: p.members[0].worker_id for p in decided.placements}
    assert where == {"in-a": "box-a", "in-b": "box-b"}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"pool": "a100"}, "a100"),
        ({"pool": "a100", "zone": "eu"}, "a100-eu"),  # the most specific selector
        ({"gpu": "h100", "zone": "eu"}, "eu-h100"),
        ({"gpu": "h100", "zone": "us"}, "h100"),
        ({"gpu": "h100"}, "h100"),
        ({"zone": "eu"}, None),  # no selector wholly matched: the shared fleet
        ({}, None),
    ],
)
def test_a_worker_is_in_the_most_specific_pool_its_labels_match(
    labels: dict[str, str], expected: str | None
) -> None:
    selectors = PoolSelectors(
        [
            ("a100", {"pool": "a100"}),
            ("a100-eu", {"pool": "a100", "zone": "eu"}),
            ("h100", {"gpu": "h100"}),
            ("eu-h100", {"zone": "eu", "gpu": "h100"}),
            ("z-h100", {"gpu": "h100"}),  # as specific as h100: the first name wins
        ]
    )
    assert selectors.pool_of(labels) == expected


def test_no_pools_means_every_worker_is_in_the_shared_fleet() -> None:
    selectors = PoolSelectors([])
    assert not selectors
    assert selectors.pool_of({"pool": "a100"}) is None
