"""Placement through the store and the worker protocol, on both stores: several workers of
different sizes and labels, waiting reasons, gangs, preemption, racing dispatchers."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import func, select, update

from herder.app import reports
from herder.control.dispatcher import Dispatcher
from herder.domain.placement.policy import plan
from herder.domain.states import AttemptState
from herder.protocol import Completion, OutputChunk
from herder.store.runs.snapshot import QUICK_WINDOW_BASE
from herder.store.schema import attempts, workers
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import as_worker, register_worker
from tests.integration.test_worker_protocol import claim, completion, log, report


def register(api: Api, name: str, **body: Any) -> str:
    capacity = {"cpu": 4, "memory_mb": 4096, "gpus": 0} | body.pop("capacity", {})
    return register_worker(api, name, **body, capacity=capacity, max_slots=8)


def run(api: Api, run_id: object) -> dict[str, Any]:
    response = api.http.get(f"/v1/runs/{run_id}", headers=api.admin)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def heartbeat(api: Api, worker_id: str, *assignments: dict[str, Any]) -> dict[str, Any]:
    running = [{"attempt_id": a["attempt_id"], "attempt": a["attempt"]} for a in assignments]
    response = api.http.post(
        f"/v1/workers/{worker_id}/heartbeat",
        headers=as_worker(worker_id),
        json={"running": running},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_runs_go_where_they_fit_best_and_the_rest_say_why(api: Api) -> None:
    small = register(api, "small", capacity={"cpu": 1, "memory_mb": 1024})
    large = register(api, "large", capacity={"cpu": 8, "memory_mb": 8192})
    tiny = api.start_run(api.create_job("tiny", resources={"cpu": 1})["id"])
    big = api.start_run(api.create_job("big", resources={"cpu": 6})["id"])
    huge = api.start_run(api.create_job("huge", resources={"cpu": 16})["id"])
    assert [a["run_id"] for a in claim(api, small)["assignments"]] == [tiny["id"]]
    assert [a["run_id"] for a in claim(api, large)["assignments"]] == [big["id"]]
    waiting = run(api, huge["id"])
    assert waiting["state"] == "queued"
    assert "no worker that could take it is big enough" in waiting["waiting_reason"]
    assert run(api, big["id"])["waiting_reason"] is None


def test_label_requirements_and_gpu_indices(api: Api) -> None:
    plain = register(api, "plain")
    h100 = register(api, "h100", capacity={"gpus": 4}, labels={"gpu_model": "h100", "zone": "eu-1"})
    job = api.create_job("train", resources={"gpus": 2}, requires={"gpu_model": "h100"})
    first, second = api.start_run(job["id"]), api.start_run(job["id"])
    assert claim(api, plain)["assignments"] == []
    given = {a["run_id"]: a["gpu_indices"] for a in claim(api, h100)["assignments"]}
    assert given == {first["id"]: [0, 1], second["id"]: [2, 3]}
    third = api.start_run(job["id"])
    dispatch(api.store)
    assert run(api, third["id"])["waiting_reason"] == (
        "needs cpu 1, 256 MB, 2 GPUs; 1 of 2 workers have gpu_model=h100 but none has room "
        "for it now (short of GPUs on 1)"
    )


def test_a_gang_starts_whole_with_ranks_and_peers_and_fails_together(api: Api) -> None:
    one = register(api, "one", capacity={"cpu": 1}, address="10.0.0.1")
    two = register(api, "two", capacity={"cpu": 1}, address="10.0.0.2")
    gang = api.start_run(api.create_job("gang", replicas=2)["id"])
    (a,) = claim(api, one)["assignments"]
    (b,) = claim(api, two)["assignments"]
    assert {a["rank"], b["rank"]} == {0, 1}
    assert a["world_size"] == b["world_size"] == 2
    by_rank = {a["rank"]: "10.0.0.1", b["rank"]: "10.0.0.2"}
    assert a["peers"] == b["peers"] == [by_rank[0], by_rank[1]]
    assert a["attempt"] == b["attempt"] == 1
    report(api, one, completions=[completion(a, "failed", 3)])
    detail = run(api, gang["id"])
    assert detail["state"] == "failed"
    states = {attempt["rank"]: attempt["state"] for attempt in detail["attempts"]}
    assert states == {a["rank"]: "failed", b["rank"]: "cancelled"}
    (late,) = report(api, two, completions=[completion(b)])
    assert late["status"] == 409
    assert heartbeat(api, two, b)["drop"] == [b["attempt_id"]]


def test_a_gang_succeeds_when_every_member_has(api: Api) -> None:
    one = register(api, "one", capacity={"cpu": 1})
    two = register(api, "two", capacity={"cpu": 1})
    gang = api.start_run(api.create_job("gang", replicas=2)["id"])
    (a,), (b,) = claim(api, one)["assignments"], claim(api, two)["assignments"]
    report(api, one, logs=[log(a, 0, f"rank {a['rank']}")], completions=[completion(a)])
    assert run(api, gang["id"])["state"] == "running"
    report(api, two, logs=[log(b, 0, f"rank {b['rank']}")], completions=[completion(b)])
    assert run(api, gang["id"])["state"] == "succeeded"
    for rank in (0, 1):
        logs = api.http.get(f"/v1/runs/{gang['id']}/logs?rank={rank}", headers=api.admin)
        assert [chunk["text"] for chunk in logs.json()["chunks"]] == [f"rank {rank}"]


def test_a_gang_that_does_not_fit_whole_takes_nothing(api: Api) -> None:
    register(api, "one", capacity={"cpu": 1})
    gang = api.start_run(api.create_job("gang", replicas=3)["id"])
    dispatch(api.store)
    detail = run(api, gang["id"])
    assert detail["state"] == "queued"
    assert "only 1 of 3 members fit" in detail["waiting_reason"]


def test_preemption_requeues_the_victim_without_using_up_a_retry(api: Api) -> None:
    worker = register(api, "w", capacity={"cpu": 1})
    retry = {"max_attempts": 2, "initial_delay_seconds": 0}
    low = api.create_job("low", priority="low", preemptible=True, retry=retry)
    victim = api.start_run(low["id"])
    (first,) = claim(api, worker)["assignments"]
    urgent = api.start_run(api.create_job("urgent", priority="high")["id"])
    dispatch(api.store)
    assert "preempting 1 lower-priority run" in run(api, urgent["id"])["waiting_reason"]
    assert heartbeat(api, worker, first)["preempt"] == [first["attempt_id"]]
    # however the worker saw the stop, the attempt ends preempted
    report(api, worker, completions=[completion(first, "cancelled", 143)])
    detail = run(api, victim["id"])
    assert detail["state"] == "queued"
    assert detail["preemptions"] == 1
    assert detail["attempts"][0]["state"] == "preempted"
    (placed,) = claim(api, worker)["assignments"]
    assert placed["run_id"] == urgent["id"]
    report(api, worker, completions=[completion(placed)])
    (second,) = claim(api, worker)["assignments"]
    assert (second["run_id"], second["attempt"]) == (victim["id"], 2)
    report(api, worker, completions=[completion(second, "failed", 1)])
    assert run(api, victim["id"])["state"] == "retry_wait"  # the preemption was not a try


def test_a_preempted_run_keeps_its_place_in_the_queue(api: Api) -> None:
    worker = register(api, "w", capacity={"cpu": 1})
    victim = api.start_run(api.create_job("low", priority="low", preemptible=True)["id"])
    (first,) = claim(api, worker)["assignments"]
    later = api.start_run(api.create_job("later", priority="low")["id"])
    urgent = api.start_run(api.create_job("urgent", priority="high")["id"])
    dispatch(api.store)
    assert heartbeat(api, worker, first)["preempt"] == [first["attempt_id"]]
    report(api, worker, completions=[completion(first, "cancelled", 143)])
    assert run(api, victim["id"])["queued_at"] == victim["queued_at"]
    (placed,) = claim(api, worker)["assignments"]
    assert placed["run_id"] == urgent["id"]
    report(api, worker, completions=[completion(placed)])
    (second,) = claim(api, worker)["assignments"]
    assert (second["run_id"], second["attempt"]) == (victim["id"], 2)  # ahead of the later run
    assert run(api, later["id"])["state"] == "queued"


def test_racing_dispatchers_never_over_commit_a_worker(api: Api) -> None:
    worker = register(api, "w", capacity={"cpu": 2})
    job = api.create_job("job", resources={"cpu": 1})
    for _ in range(4):
        api.start_run(job["id"])
    placement = api.store.placement
    one, two = plan(placement.snapshot()), plan(placement.snapshot())
    assert len(one.placements) == len(two.placements) == 2
    assert len(placement.apply(one).placed) == 2
    applied = placement.apply(two)
    assert applied.placed == []
    assert len(applied.skipped) == 2
    with api.store.database.read() as connection:
        running = connection.execute(
            select(func.count()).where(
                attempts.c.worker_id == worker, attempts.c.state == AttemptState.RUNNING
            )
        ).scalar_one()
    assert running == 2


def test_a_draining_worker_gets_nothing_new_and_keeps_what_it_runs(api: Api) -> None:
    worker = register(api, "w", capacity={"cpu": 1})
    job = api.create_job("job")
    first = api.start_run(job["id"])
    (running,) = claim(api, worker)["assignments"]
    with api.store.database.write() as connection:
        connection.execute(update(workers).where(workers.c.id == worker).values(state="draining"))
    report(api, worker, completions=[completion(running)])
    second = api.start_run(job["id"])
    assert claim(api, worker)["assignments"] == []
    assert run(api, first["id"])["state"] == "succeeded"
    assert "no worker is available (1 draining)" in run(api, second["id"])["waiting_reason"]


def test_passes_are_paced_by_how_long_the_last_one_took(api: Api) -> None:
    now = [100.0]
    passes: list[float] = []
    placement = api.store.placement

    class SlowPlacement:
        """The real repository, but every snapshot "takes" 0.2 s."""

        def __getattr__(self, name: str) -> Any:
            return getattr(placement, name)

        def snapshot(self, **options: Any) -> Any:
            passes.append(now[0])
            now[0] += 0.2
            return placement.snapshot(**options)

    dispatcher = Dispatcher(SlowPlacement(), monotonic=lambda: now[0])  # type: ignore[arg-type]
    dispatcher.step()
    assert passes == [100.0]  # the first pass starts at once
    now[0] += 0.2  # woken no sooner than the last pass's end plus its 0.2 s
    dispatcher.step()
    assert len(passes) == 2
    now[0] += 0.05  # a notice woke the dispatcher sooner: it waits the rest, no pass
    assert dispatcher.step() == pytest.approx(0.15)
    assert len(passes) == 2


def test_one_tenants_backlog_does_not_hide_another_tenants_runs(api: Api) -> None:
    register(api, "w", capacity={"cpu": 1})
    busy = api.create_job("busy")
    for _ in range(5):
        api.start_run(busy["id"])
    other_key = api.other_tenant_key("other")
    other_job = api.http.post(
        "/v1/jobs", headers=api.as_key(other_key),
        json={"name": "small", "runtime": "shell", "command": "true"},
    ).json()  # fmt: skip
    other_run = api.http.post(f"/v1/jobs/{other_job['id']}/runs", headers=api.as_key(other_key))
    snapshot = api.store.placement.snapshot(window=10, per_tenant=2)
    tenants = [run.tenant_id for run in snapshot.queued]
    assert len(tenants) == 3
    assert tenants.count(api.tenant_id) == 2
    assert other_run.json()["id"] in {run.id for run in snapshot.queued}


@pytest.mark.parametrize(
    ("outcomes", "settled"),
    [
        (("succeeded", "succeeded"), "succeeded"),
        (("failed", "succeeded"), "failed"),
        (("failed", "failed"), "failed"),
    ],
)
def test_gang_members_ending_at_the_same_moment_settle_the_run(
    api: Api, outcomes: tuple[str, str], settled: str
) -> None:
    """Each member's report sees the other's only once it has committed: without a lock on
    the run both would think the other still running, and the run would never end (or, when
    one fails, the two would deadlock)."""
    workers_ = [register(api, f"w{index}", capacity={"cpu": 1}) for index in range(2)]
    job = api.create_job("gang", replicas=2)

    def finish(
        barrier: threading.Barrier, worker_id: str, member: dict[str, Any], outcome: str
    ) -> None:
        done = Completion(
            attempt_id=member["attempt_id"], attempt=member["attempt"],
            outcome=AttemptState(outcome), exit_code=0, reason=outcome,
        )  # fmt: skip
        last_words = OutputChunk.of(member["attempt_id"], member["attempt"], 0, "stdout", b"bye\n")
        barrier.wait()
        results = reports.report(api.store, worker_id, [last_words], [done])
        assert {result.status for result in results} <= {200, 409}

    for _ in range(5):
        gang = api.start_run(job["id"])
        members = [claim(api, worker)["assignments"][0] for worker in workers_]
        barrier = threading.Barrier(2)
        threads = [
            threading.Thread(target=finish, args=(barrier, worker, member, outcome))
            for worker, member, outcome in zip(workers_, members, outcomes, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert run(api, gang["id"])["state"] == settled


def test_a_quick_snapshot_reads_only_what_the_free_slots_could_take(api: Api) -> None:
    response = api.http.post(
        "/v1/workers",
        headers=api.worker,
        json={"name": "w", "capacity": {"cpu": 4, "memory_mb": 4096}, "max_slots": 2},
    )
    assert response.status_code == 201
    job = api.create_job("many", resources={"cpu": 0.01, "memory_mb": 8})
    for _ in range(100):
        api.start_run(job["id"])
    assert len(api.store.placement.snapshot().queued) == 100
    assert len(api.store.placement.snapshot(quick=True).queued) == QUICK_WINDOW_BASE + 2 * 2


def test_only_a_queued_run_says_why_it_waits(api: Api) -> None:
    queued = api.start_run(api.create_job("nowhere", requires={"zone": "mars"})["id"])
    dispatch(api.store)
    assert "no worker is available" in run(api, queued["id"])["waiting_reason"]
    api.http.post(f"/v1/runs/{queued['id']}/cancel", headers=api.admin)
    cancelled = run(api, queued["id"])
    assert (cancelled["state"], cancelled["waiting_reason"]) == ("cancelled", None)


def test_a_cancel_wins_over_a_preemption(api: Api) -> None:
    worker = register(api, "w", capacity={"cpu": 1})
    victim = api.start_run(api.create_job("low", priority="low", preemptible=True)["id"])
    (first,) = claim(api, worker)["assignments"]
    api.start_run(api.create_job("urgent", priority="high")["id"])
    dispatch(api.store)  # the low run is chosen as a victim...
    api.http.post(f"/v1/runs/{victim['id']}/cancel", headers=api.admin)  # ...and cancelled
    assert heartbeat(api, worker, first)["cancel"] == [first["attempt_id"]]
    report(api, worker, completions=[completion(first, "cancelled", 143)])
    assert run(api, victim["id"])["state"] == "cancelled"


def test_a_run_cancelled_before_its_worker_claimed_it_never_reaches_the_worker(api: Api) -> None:
    worker = register(api, "w")
    cancelled = api.start_run(api.create_job("job")["id"])
    dispatch(api.store)
    api.http.post(f"/v1/runs/{cancelled['id']}/cancel", headers=api.admin)
    assert claim(api, worker)["assignments"] == []
    detail = run(api, cancelled["id"])
    assert detail["state"] == "cancelled"
    assert detail["attempts"][0]["reason"] == "cancelled before it reached its worker"


def test_a_quick_snapshot_also_sees_the_longest_waiting_runs(api: Api) -> None:
    api.http.post(
        "/v1/workers",
        headers=api.worker,
        json={"name": "w", "capacity": {"cpu": 4, "memory_mb": 4096}, "max_slots": 1},
    )
    oldest = api.start_run(api.create_job("old-low", priority="low")["id"])
    high = api.create_job("high", priority="high")
    for _ in range(QUICK_WINDOW_BASE + 10):
        api.start_run(high["id"])
    seen = {run.id for run in api.store.placement.snapshot(quick=True).queued}
    assert oldest["id"] in seen
