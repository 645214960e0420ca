"""Issue 40's heavy event against a real ``herder server`` on SQLite, where every tenant's
writes queue on one writer lock: another tenant's run submissions go on while a tenant
sends events whose triggers compare two 60,000-item lists deeply (docs/events.md#what-an-
event-may-cost). Before, each such event held the lock for as long as its filters took:
the other tenant's submissions waited 49 s behind three of them here (31.7 s in the issue);
now 0.3 s. On PostgreSQL they never waited on its locks (1 s, the server's CPU): there the
events are bounded by their budget."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.system.conftest import Cluster

pytestmark = [pytest.mark.system]

ITEMS = 60_000
PAYLOAD = {"a": [1] * ITEMS, "b": [1] * ITEMS}  # 240 KB as JSON
HEAVY = " and ".join(["payload.a==payload.b"] * 16)  # as many as a filter may hold
EVENTS = 3  # sent at once, as in the issue
SUBMIT_BOUND_SECONDS = 3.0  # far below what one such event cost before (16 s on this box)


def test_another_tenants_submissions_go_on_while_heavy_events_are_decided(
    start_cluster: Callable[..., Cluster],
) -> None:
    submissions_go_on_beside_heavy_events(start_cluster(scheduler=False))


@pytest.mark.postgres
def test_on_postgresql_too(start_cluster: Callable[..., Cluster], system_postgres_url: str) -> None:
    submissions_go_on_beside_heavy_events(start_cluster(system_postgres_url, scheduler=False))


def submissions_go_on_beside_heavy_events(cluster: Cluster) -> None:
    url = cluster.url
    sender = {"Authorization": f"Bearer {cluster.credentials['api_key']}"}
    tenant = httpx.post(f"{url}/v1/tenants", headers=sender, json={"name": "bystander"}).json()
    key = httpx.post(
        f"{url}/v1/tenants/{tenant['id']}/keys", headers=sender, json={"role": "developer"}
    ).json()
    bystander = {"Authorization": f"Bearer {key['token']}"}
    job = {"name": "work", "runtime": "shell", "command": "true"}
    assert httpx.post(f"{url}/v1/jobs", headers=sender, json=job).status_code == 201
    theirs = httpx.post(f"{url}/v1/jobs", headers=bystander, json=job).json()
    for n in range(20):
        body = {"name": f"t{n:02}", "event": "heavy", "job": "work", "filter": HEAVY}
        made = httpx.post(f"{url}/v1/triggers", headers=sender, json=body)
        assert made.status_code == 201, made.text

    latencies: list[tuple[float, float]] = []  # (sent, answered) of each of their submissions
    done = threading.Event()

    def submit_meanwhile() -> None:
        with httpx.Client(base_url=url, headers=bystander, timeout=120) as client:
            while not done.is_set():
                sent = time.monotonic()
                answer = client.post(f"/v1/jobs/{theirs['id']}/runs")
                assert answer.status_code == 201, answer.text
                latencies.append((sent, time.monotonic()))

    def send_event() -> tuple[float, httpx.Response]:
        with httpx.Client(base_url=url, headers=sender, timeout=120) as client:
            answer = client.post("/v1/events", json={"name": "heavy", "payload": PAYLOAD})
            return time.monotonic(), answer

    with ThreadPoolExecutor(1 + EVENTS) as pool:
        submitting = pool.submit(submit_meanwhile)
        while not latencies:  # their submissions are going before the events are sent
            assert not submitting.done(), submitting.exception()
        started = time.monotonic()
        sent = [pool.submit(send_event) for _ in range(EVENTS)]
        answers = [future.result() for future in sent]
        done.set()
        submitting.result()

    last_answer = max(at for at, _ in answers)
    during = [(sent, answered) for sent, answered in latencies if sent < last_answer]
    during = [(sent, answered) for sent, answered in during if answered > started]
    assert during, "no submission of theirs overlapped the events"
    slowest = max(answered - sent for sent, answered in during)
    assert slowest < SUBMIT_BOUND_SECONDS, (slowest, last_answer - started)
    for _, answer in answers:
        assert answer.status_code == 201, answer.text
        outcomes = answer.json()["event"]["outcomes"]
        assert len(outcomes) == 20
        assert all(one["run_id"] is None for one in outcomes)
        assert outcomes[0]["error"].startswith("filter: takes more than 100,000 steps")
