"""Metrics of real server processes: ``herder server --processes 2`` adds up what each API
process (and its control loops' process) counted, whichever answers the scrape; ``herder
scheduler --metrics-port`` serves its own."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from herder.settings import sqlite_url
from tests.system.conftest import HERDER, Cluster, free_port, stop, wait_until

pytestmark = [pytest.mark.system]

REQUESTS = 24
SCRAPES = 6


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.postgres
def test_every_scrape_adds_up_every_api_process(
    start_cluster: Callable[..., Cluster], system_postgres_url: str
) -> None:
    cluster = start_cluster(system_postgres_url, processes=2)
    assert cluster.server is not None
    headers = {"Authorization": f"Bearer {cluster.credentials['api_key']}"}
    directory = cluster.home / f"metrics-{cluster.url.rsplit(':', 1)[1]}"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for _ in range(REQUESTS):  # a connection each: the processes share them out
        assert httpx.get(f"{cluster.url}/v1/jobs", headers=headers).status_code == 200
    jobs = (
        "herder_api_request_duration_seconds_count",
        (("method", "GET"), ("route", "/v1/jobs"), ("status", "2xx")),
    )
    scrapes = [
        samples(httpx.get(f"{cluster.url}/metrics", headers=headers).text) for _ in range(SCRAPES)
    ]
    assert [scrape[jobs] for scrape in scrapes] == [REQUESTS] * SCRAPES
    assert not [name for name, _ in scrapes[0] if name.endswith("_created")]
    writers = {path.stem.rsplit("_", 1)[1] for path in directory.glob("histogram_*.db")}
    assert len(writers) >= 2  # the API processes and the control loops' process
    wait_until(
        lambda: (
            samples(httpx.get(f"{cluster.url}/metrics", headers=headers).text).get(
                ("herder_control_loop_pass_seconds_count", (("loop", "dispatcher"),)), 0
            )
            > 0
        ),
        10,
        "the control loops' passes, counted in their own process",
    )
    cluster.server.send_signal(signal.SIGTERM)
    assert cluster.server.wait(20) == 0
    assert not directory.exists()


def test_the_scheduler_serves_its_own_metrics(tmp_path: Path) -> None:
    port = free_port()
    environment = {"HERDER_HOME": str(tmp_path), "PYTHONUNBUFFERED": "1",
                   "HERDER_DATABASE_URL": sqlite_url(tmp_path / "herder.db"),
                   "HERDER_CELL": "a", "HERDER_REGION": "eu"}  # fmt: skip
    process = subprocess.Popen(
        [*HERDER, "scheduler", "--metrics-port", str(port)],
        env={**os.environ, **environment},
    )
    try:
        url = f"http://127.0.0.1:{port}/metrics"

        def dispatcher_passed() -> bool:
            try:
                text = httpx.get(url, timeout=1).text
            except httpx.TransportError:
                return False
            key = ("herder_control_loop_last_pass_timestamp_seconds", (("loop", "dispatcher"),))
            return samples(text).get(key, 0) > 0

        wait_until(dispatcher_passed, 20, "the scheduler's metrics")
        named = samples(httpx.get(url, timeout=5).text)  # which cell's scheduler it is
        assert named[("herder_cell_info", (("cell", "a"), ("region", "eu")))] == 1
    finally:
        stop(process)
