"""Placement's ranking stage alone: best fit scores what a worker has left (each resource as a
fraction of its size; lower wins), a GPU worker costs a run without GPUs a penalty, ties go
by worker id, and only the first ``SCORED_WORKERS`` are scored."""

from __future__ import annotations

import pytest

from herder.domain.placement import ranking
from herder.domain.placement.ranking import GPU_WORKER_PENALTY, best, rank, score
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import WorkerView
from tests.unit.placement_snapshots import need, rooms, running, worker

ONE = need(cpu=1, memory_mb=256)


@pytest.mark.parametrize(
    ("capacity", "busy", "wanted", "expected"),
    [
        pytest.param((8, 16384, 0), 0, ONE, 7 / 8 + 16128 / 16384, id="empty worker"),
        pytest.param((8, 16384, 0), 4, ONE, 3 / 8 + 15104 / 16384, id="half busy: tighter"),
        pytest.param((1, 256, 0), 0, ONE, 0.0, id="exactly full after"),
        pytest.param(
            (8, 16384, 4), 0, ONE, 7 / 8 + 16128 / 16384 + 1 + GPU_WORKER_PENALTY, id="gpus unasked"
        ),
        pytest.param(
            (8, 16384, 4),
            0,
            need(cpu=1, memory_mb=256, gpus=2),
            7 / 8 + 16128 / 16384 + 2 / 4,
            id="gpus asked: no penalty",
        ),
    ],
)
def test_score_is_the_free_fraction_left_after_placing(
    capacity: tuple[float, int, int], busy: int, wanted: Amount, expected: float
) -> None:
    cpu, memory_mb, gpus = capacity
    load = tuple(running(f"x{i}", cpu=1, memory_mb=256, preemptible=False) for i in range(busy))
    (room,) = rooms(worker("w", cpu=cpu, memory_mb=memory_mb, gpus=gpus, running=load))
    assert score(room, wanted) == pytest.approx(expected)


def test_score_can_be_asked_of_free_room_other_than_the_worker_s() -> None:
    (room,) = rooms(worker("w", cpu=8, memory_mb=16384))
    free = Amount(4000, 8192, 0, 100)
    assert score(room, ONE, free) == pytest.approx(3 / 8 + 7936 / 16384)
    assert score(room, ONE) == pytest.approx(7 / 8 + 16128 / 16384)  # its own, untouched


def test_rank_breaks_a_tie_by_worker_id() -> None:
    b, a = rooms(worker("b"), worker("a"))
    assert rank(a, ONE) < rank(b, ONE)
    assert rank(a, ONE)[0] == rank(b, ONE)[0]


@pytest.mark.parametrize(
    ("workers", "chosen"),
    [
        pytest.param([worker("big", cpu=8), worker("small", cpu=2)], "small", id="tightest fit"),
        pytest.param([worker("b", cpu=4), worker("a", cpu=4)], "a", id="a tie: lower id"),
        pytest.param(
            [worker("gpu", cpu=2, gpus=1), worker("plain", cpu=8)], "plain", id="off GPU workers"
        ),
        pytest.param([], None, id="none given"),
    ],
)
def test_best_is_the_lowest_ranked(workers: list[WorkerView], chosen: str | None) -> None:
    found = best(rooms(*workers), ONE)
    assert (found.id if found else None) == chosen


def test_best_scores_only_the_first_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranking, "SCORED_WORKERS", 2)
    found = best(rooms(worker("w0", cpu=8), worker("w1", cpu=4), worker("w2", cpu=1)), ONE)
    assert found is not None
    assert found.id == "w1"  # w2 fits tightest, but is past the first two


def test_best_uses_the_free_room_given_per_worker() -> None:
    w0, w1 = rooms(worker("w0", cpu=8), worker("w1", cpu=8))
    free = {"w0": Amount(8000, 16384, 0, 100), "w1": Amount(1000, 16384, 0, 100)}
    found = best([w0, w1], ONE, free)
    assert found is w1
