"""The dashboard's listings with 100,000 runs stored: each page the runs and dead-letter pages
ask for (newest first, filtered by state or job, paged by cursor) is read through an index and
answers at once — the page never loads the history. SQLite, as ``herder up`` keeps it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from herder.domain.ids import id_bound, id_time_ms
from herder.store.schema import runs
from tests.integration.conftest import Api
from tests.integration.one_app import sqlite_app

STORED = 100_000
PAGE = 50
ENDED = ("succeeded", "failed", "dead")
SECONDS_PER_PAGE = 1.0  # generous for a loaded machine; a scan of the history takes longer


@pytest.fixture(scope="module")
def api(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with sqlite_app(sqlite_template, tmp_path_factory.mktemp("dashboard-scale")) as app:
        yield app


@pytest.fixture(scope="module")
def history(api: Api) -> dict[str, Any]:
    """100,000 ended runs older than one queued run (made an hour before it, well inside the
    tenant's retention), copied from it in one statement."""
    job = api.create_job("nightly")
    newest = api.start_run(job["id"])
    an_hour_before = id_bound("run", id_time_ms(newest["id"]) - 3_600_000)
    copied = ", ".join(c.name for c in runs.c if c.name not in ("id", "state"))
    statement = text(
        "WITH RECURSIVE numbers(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM numbers"
        f" WHERE n < {STORED}) INSERT INTO runs (id, state, {copied})"
        " SELECT :an_hour_before || printf('%016d', n),"
        f" CASE n % 3 WHEN 0 THEN '{ENDED[0]}' WHEN 1 THEN '{ENDED[1]}' ELSE '{ENDED[2]}' END,"
        f" {copied} FROM numbers CROSS JOIN (SELECT * FROM runs WHERE id = :id)"
    )
    with api.store.database.engine.begin() as connection:
        connection.execute(statement, {"id": newest["id"], "an_hour_before": an_hour_before})
    return newest


def timed_page(api: Api, **params: object) -> dict[str, Any]:
    started = time.monotonic()
    response = api.http.get("/v1/runs", headers=api.admin, params={"limit": PAGE, **params})
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert elapsed < SECONDS_PER_PAGE, f"{params}: {elapsed:.2f}s"
    page: dict[str, Any] = response.json()
    return page


def test_the_newest_runs_page_by_cursor(api: Api, history: dict[str, Any]) -> None:
    first = timed_page(api)
    items = first["items"]
    assert isinstance(items, list)
    assert items[0]["id"] == history["id"]
    assert len(items) == PAGE
    seen = {item["id"] for item in items}
    cursor = first["next_cursor"]
    for _ in range(3):
        page = timed_page(api, cursor=cursor)
        page_items = page["items"]
        assert isinstance(page_items, list)
        assert seen.isdisjoint(item["id"] for item in page_items)
        seen.update(item["id"] for item in page_items)
        cursor = page["next_cursor"]
    assert len(seen) == 4 * PAGE


@pytest.mark.parametrize("state", ["dead", "queued", "running"])
def test_a_state_filter_pages_from_its_index(api: Api, history: dict[str, Any], state: str) -> None:
    page = timed_page(api, state=state)
    items = page["items"]
    assert isinstance(items, list)
    assert {item["state"] for item in items} <= {state}
    assert len(items) == {"dead": PAGE, "queued": 1, "running": 0}[state]


def test_a_job_filter_pages_from_its_index(api: Api, history: dict[str, Any]) -> None:
    other = api.create_job("other")
    api.start_run(other["id"])
    assert len(timed_page(api, job_id=history["job_id"])["items"]) == PAGE
    only = timed_page(api, job_id=other["id"])["items"]
    assert isinstance(only, list)
    assert len(only) == 1
