"""``herder top``'s picture, drawn from given numbers: the fleet's and a tenant's, 80 columns
kept, long names cut, and a failed refresh shown beside the last good numbers."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from rich.console import Console

from herder.cli.top import Reading, frame, read, sparkline
from herder.client import HerderClient
from herder.client.retries import Retries
from herder.domain.jobs import Capacity, Priority
from herder.domain.models import QueueEntry, Worker, WorkerState
from herder.domain.stats import MinuteOutcomes, ResourceTotals, Stats, window_start

NOW = datetime(2026, 11, 24, 12, 0, 30, tzinfo=UTC)
LONG_REASON = "no worker has 64 cpu free; the largest has 8 (worker-a), and more words follow"


def series(ended: dict[int, tuple[int, int]]) -> list[MinuteOutcomes]:
    """Sixty minutes, with (succeeded, failed) at the given minutes of the window."""
    start = window_start(NOW, 60)
    return [
        MinuteOutcomes(
            minute=start + timedelta(minutes=i),
            succeeded=ended.get(i, (0, 0))[0],
            failed=ended.get(i, (0, 0))[1],
        )
        for i in range(60)
    ]


def fleet_stats() -> Stats:
    return Stats(
        scope="fleet", at=NOW, minutes=60,
        runs={"queued": 57, "running": 5, "retry_wait": 1, "dead": 2},
        throughput=series({0: (3, 0), 58: (6, 2), 59: (1, 0)}),
        ended={"succeeded": 10, "failed": 2, "cancelled": 0}, failure_rate=2 / 12,
        resources={
            "used": ResourceTotals(cpu=3, memory_mb=2048, gpus=0, slots=5),
            "capacity": ResourceTotals(cpu=8, memory_mb=16384, gpus=0, slots=30),
        },
        workers={"alive": 2, "draining": 0, "lost": 1},
    )  # fmt: skip


def tenant_stats() -> Stats:
    return fleet_stats().model_copy(
        update={
            "scope": "tenant",
            "workers": None,
            "resources": {
                "used": ResourceTotals(cpu=1.5, memory_mb=300, gpus=0, slots=1),
                "capacity": None,
            },
        }
    )


def entry(job_name: str = "nightly-report-for-the-finance-team") -> QueueEntry:
    return QueueEntry(
        run_id="run_01KAB3XYZ0123456789ABCDEFG", tenant_id="ten_1", tenant_name="team",
        job_id="job_1",
        job_name=job_name, priority=Priority.HIGH, resources=Capacity(), replicas=1,
        requires={}, queued_at=NOW - timedelta(seconds=185), waited_seconds=185,
        waiting_reason=LONG_REASON,
    )  # fmt: skip


def worker(name: str, state: WorkerState, heartbeat_seconds_ago: float) -> Worker:
    return Worker(
        id=f"wrk_{name}", name=name, state=state,
        capacity=Capacity(cpu=8, memory_mb=16384, gpus=1), max_slots=256, labels={},
        version="1", registered_at=NOW - timedelta(days=1),
        last_heartbeat_at=NOW - timedelta(seconds=heartbeat_seconds_ago),
    )  # fmt: skip


def drawn(picture: object) -> list[str]:
    console = Console(width=80, record=True, color_system=None, file=io.StringIO())
    console.print(picture)
    return [line.rstrip() for line in console.export_text().splitlines()]


def test_the_fleet_view_has_counts_rates_throughput_queue_and_workers() -> None:
    workers = [
        worker("gpu-box-in-the-far-corner.example.com", WorkerState.ALIVE, 3),
        worker("b", WorkerState.LOST, 300),
    ]
    lines = drawn(frame(fleet_stats(), [entry()], workers, NOW))
    text = "\n".join(lines)
    assert all(len(line) <= 80 for line in lines)
    assert "herder top · the fleet" in text
    assert "queued 57   running 5   retry_wait 1   dead 2\nworkers 2 alive 1 lost\n" in text
    assert "last 60 min: 10 succeeded  2 failed  0 cancelled  failure rate 16.7%" in text
    assert "ended/min " + "▄" + "▁" * 57 + "█▂ peak 8" in text
    assert "3/8" in text
    assert "2.0 GB/16.0 GB" in text
    assert "5/30" in text
    assert "queue: first 1 of 57" in text
    row = next(line for line in lines if line.startswith("run_"))
    assert row.split()[:5] == ["run_01KAB3XY", "nightly-report-…", "high", "3m05s", "no"]
    assert row.endswith("…")  # the reason is cut to the line, not wrapped
    assert "workers: 2" in text
    assert "gpu-box-in-the-…  alive  256    8    16.0 GB  1     3s ago" in text
    assert "lost   256    8    16.0 GB  1     5m00s ago" in text
    assert "updated 12:00:30 UTC" in text
    assert "refresh failed" not in text


def test_a_tenant_sees_its_runs_and_is_told_the_fleet_needs_a_system_admin() -> None:
    text = "\n".join(drawn(frame(tenant_stats(), [], [], NOW)))
    assert "herder top · your tenant" in text
    assert "workers" not in text.splitlines()[1]  # no fleet counts for a tenant
    assert "in use: cpu 1.5 · memory 300 MB · gpus 0 · slots 1" in text
    assert "queue: nothing is waiting" in text
    assert "workers: the fleet view needs a system admin key" in text


def test_a_failed_refresh_is_shown_under_the_last_good_numbers() -> None:
    error = "cannot reach the Herder server at http://127.0.0.1:8080: connection refused"
    lines = drawn(frame(fleet_stats(), [entry()], [], NOW + timedelta(seconds=9), error=error))
    text = " ".join(lines)
    assert all(len(line) <= 80 for line in lines)
    assert "queued 57" in text  # the last numbers stay
    assert "updated 12:00:30 UTC" in text
    assert f"refresh failed at 12:00:39 UTC: {error}; retrying" in text


def test_before_any_answer_only_the_error_is_shown() -> None:
    text = "\n".join(drawn(frame(None, [], [], NOW, error="Bad gateway (HTTP 502)")))
    assert "waiting for the server's first answer" in text
    assert "not updated yet" in text
    assert "refresh failed at 12:00:30 UTC: Bad gateway (HTTP 502); retrying" in text


def test_tables_keep_to_the_rows_given() -> None:
    workers = [worker(f"w{i}", WorkerState.ALIVE, 1) for i in range(5)]
    text = "\n".join(drawn(frame(fleet_stats(), [entry()] * 5, workers, NOW, rows=2)))
    assert "queue: first 2 of 57" in text
    assert "w1 " in text
    assert "w2 " not in text
    assert "and 3 more: herder worker list" in text


def test_a_worker_name_is_shown_as_given_never_read_as_markup() -> None:
    text = "\n".join(
        drawn(frame(fleet_stats(), [], [worker("[/]x[bold]", WorkerState.ALIVE, 1)], NOW))
    )
    assert "[/]x[bold]" in text


@pytest.mark.parametrize(
    ("ended", "expected"),
    [
        pytest.param({}, "▁" * 60, id="nothing ended"),
        pytest.param({59: (1, 0)}, "▁" * 59 + "█", id="one run is the peak"),
        pytest.param({0: (7, 0), 1: (1, 0)}, "█▂" + "▁" * 58, id="any run shows above zero"),
    ],
)
def test_sparkline_blocks_scale_to_the_busiest_minute(
    ended: dict[int, tuple[int, int]], expected: str
) -> None:
    assert sparkline(series(ended)).plain == expected


def test_a_failed_read_keeps_the_last_numbers_and_says_why() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>bad gateway</html>")

    last = Reading(stats=fleet_stats(), queue=[entry()])
    http = httpx.Client(base_url="http://herder", transport=httpx.MockTransport(answer))
    no_retries = Retries(budget_seconds=0)  # as the live view reads
    with http, HerderClient("http://herder", "key", http=http, retries=no_retries) as herder:
        reading = read(herder, last)
    assert reading.stats == last.stats
    assert reading.queue == last.queue
    assert reading.error == "<html>bad gateway</html> (HTTP 502)"
