"""The run listing reads recent slices first and widens: every run a filter matches comes back
once, newest first, page after page, however far apart in time the runs were made."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from herder.app.submit import submit
from herder.domain.jobs import JobSpec
from herder.domain.listings import PageRequest, RunQuery
from herder.domain.overrides import RunOverrides
from herder.domain.states import RunState
from herder.store.pagination import encode_cursor
from herder.store.store import Store
from tests.clocks import ManualClock

NOW = datetime(2027, 3, 10, 12, 0, tzinfo=UTC)
# From five years back (inside the default retention) to now: each window of the walk
# (1, 4, 16, 64, 256 weeks) and the gaps between them.
WEEKS_AGO = (255, 200, 70, 63, 17, 5, 2, 1, 0)


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    store = Store(database_url, clock=ManualClock(NOW), rng=random.Random(3))
    yield store
    store.close()


def submit_over_the_years(store: Store, tenant_id: str, job_id: str, other_id: str) -> list[str]:
    """A run of the job (and one of another job) at each of ``WEEKS_AGO``; the job's ids,
    newest first."""
    clock = store.clock
    assert isinstance(clock, ManualClock)
    made = []
    for weeks in WEEKS_AGO:
        clock.moment = NOW - timedelta(weeks=weeks)
        made.append(submit(store, tenant_id, job_id, RunOverrides())[0].id)
        submit(store, tenant_id, other_id, RunOverrides())
    clock.moment = NOW
    return made[::-1]


def all_pages(store: Store, tenant_id: str, limit: int, **filters: Any) -> list[str]:
    listed: list[str] = []
    cursor = None
    while True:
        page = store.runs.list(tenant_id, RunQuery(**filters, page=PageRequest(limit, cursor)))
        listed += [run.id for run in page.items]
        if page.next_cursor is None:
            return listed
        cursor = page.next_cursor


def jobs(store: Store, tenant_id: str) -> tuple[str, str]:
    spec = JobSpec.model_validate({"runtime": "shell", "command": "true"})
    first, second = (store.jobs.create(tenant_id, name, spec).id for name in ("a", "b"))
    return first, second


@pytest.mark.parametrize("limit", [1, 2, 4, 100])
def test_a_jobs_runs_made_years_apart_list_newest_first_page_by_page(
    store: Store, limit: int
) -> None:
    tenant_id = store.access.create_tenant("t").id
    job_id, other_id = jobs(store, tenant_id)
    made = submit_over_the_years(store, tenant_id, job_id, other_id)

    assert all_pages(store, tenant_id, limit, job_id=job_id) == made
    assert len(all_pages(store, tenant_id, limit)) == 2 * len(made)


def test_a_page_ending_on_a_windows_last_run_says_whether_more_follow(store: Store) -> None:
    tenant_id = store.access.create_tenant("t").id
    job_id, other_id = jobs(store, tenant_id)
    made = submit_over_the_years(store, tenant_id, job_id, other_id)

    # runs of the last week: now, 1 week and 2 weeks back fall in the first two windows
    first = store.runs.list(tenant_id, RunQuery(job_id=job_id, page=PageRequest(limit=2)))
    assert [run.id for run in first.items] == made[:2]
    assert first.next_cursor is not None
    everything = store.runs.list(
        tenant_id, RunQuery(job_id=job_id, page=PageRequest(limit=len(made)))
    )
    assert [run.id for run in everything.items] == made
    assert everything.next_cursor is None


def test_a_state_filter_walks_the_windows_too(store: Store) -> None:
    tenant_id = store.access.create_tenant("t").id
    job_id, other_id = jobs(store, tenant_id)
    made = submit_over_the_years(store, tenant_id, job_id, other_id)

    queued = all_pages(store, tenant_id, 3, job_id=job_id, states=[RunState.QUEUED])
    assert queued == made
    assert all_pages(store, tenant_id, 3, states=[RunState.SUCCEEDED]) == []


@pytest.mark.parametrize(
    "top", ["run_" + "Z" * 26, "run_0I" + "0" * 24, "run_" + "0" * 26, "job_01" + "L" * 24]
)
def test_a_cursor_no_run_was_made_at_still_reads_below_it(store: Store, top: str) -> None:
    tenant_id = store.access.create_tenant("t").id
    job_id, other_id = jobs(store, tenant_id)
    made = submit_over_the_years(store, tenant_id, job_id, other_id)

    page = store.runs.list(
        tenant_id, RunQuery(job_id=job_id, page=PageRequest(100, encode_cursor(top)))
    )
    assert [run.id for run in page.items] == [run_id for run_id in made if run_id < top]
