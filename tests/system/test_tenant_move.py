"""A tenant moved between two cells under load (issue 45, docs/cells.md, "Moving a tenant"):
each cell a ``herder server --with-scheduler`` on a PostgreSQL server of its own, with a
worker; one ``herder edge`` in front. While the tenant's schedule fires every second and
one-off runs are submitted through the edge (each retried on the 503 the move answers), it
is moved from cell a to cell b with ``herder``'s client. Afterwards, across both cells'
databases, each nominal instant of the schedule has exactly one run and none between the
first and the last is missing; every acknowledged one-off is there exactly once; what it
had queued or running in cell a finished there; its runs from before the move are read by
id through the edge; its API key works against cell b."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, select

from herder.client import HerderClient
from herder.client.retries import Retries
from herder.domain.states import RunState
from herder.store.database import normalize_url
from herder.store.schema import runs
from tests.system.conftest import wait_until
from tests.system.own_postgres import OwnPostgres
from tests.system.test_cells import (
    EVERY_SECOND,
    SPEC,
    BehindAnEdge,
    behind_an_edge,
    cell_admins,
    two_postgres,
)

pytestmark = [pytest.mark.system, pytest.mark.postgres]
__all__ = ["behind_an_edge", "two_postgres"]  # the fixtures, shared with test_cells


def _rows(postgres: OwnPostgres, tenant_id: str) -> list[tuple[str, datetime | None, str]]:
    """(id, scheduled_for, state) of each of the tenant's runs in one cell's database."""
    engine = create_engine(normalize_url(postgres.url))
    try:
        with engine.connect() as connection:
            return [
                (row.id, row.scheduled_for, row.state)
                for row in connection.execute(
                    select(runs.c.id, runs.c.scheduled_for, runs.c.state).where(
                        runs.c.tenant_id == tenant_id
                    )
                )
            ]
    finally:
        engine.dispose()


class Submitter:
    """One-off runs submitted through the edge, one after another, each keyed and retried
    (the client retries a keyed submission's 503 for 60 s): what it was told was made."""

    def __init__(self, client: HerderClient, job_id: str) -> None:
        self.client = client
        self.job_id = job_id
        self.acknowledged: list[str] = []
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name="submitter", daemon=True)

    def _run(self) -> None:
        try:
            while not self.stop.wait(0.2):
                run = self.client.start_run(self.job_id, idempotency_key=uuid.uuid4().hex)
                self.acknowledged.append(run.id)
        except BaseException as error:  # reported by the test
            self.errors.append(error)


@pytest.mark.timeout(400)
def test_a_tenant_moves_with_no_fire_missed_or_doubled_and_nothing_lost(
    behind_an_edge: BehindAnEdge,
) -> None:
    (postgres_a, postgres_b), edge = behind_an_edge.postgres, behind_an_edge.edge
    b_key = behind_an_edge.cells[1].credentials["api_key"]
    with cell_admins(edge, *behind_an_edge.cells) as (admin_a, _):
        tenant = admin_a.create_tenant("alpha")
        key = admin_a.create_api_key(tenant.id, role="admin")
        with HerderClient(edge, key, retries=Retries(60)) as client:
            job_id = client.create_job("steady", SPEC).id
            schedule_id = client.create_schedule(job_id, {"cron": EVERY_SECOND}).id
            before = [client.start_run(job_id, idempotency_key=uuid.uuid4().hex).id]
            wait_until(lambda: len(_rows(postgres_a, tenant.id)) >= 4, 60, "fires in cell a")
            submitter = Submitter(client, job_id)
            submitter.thread.start()
            moved = admin_a.move_tenant(tenant.id, "b", target_key=b_key)
            assert (moved.from_cell, moved.to_cell, moved.schedules) == ("a", "b", 1)
            after_move = datetime.now(UTC)
            wait_until(
                lambda: any(
                    scheduled and scheduled >= after_move + timedelta(seconds=3)
                    for _, scheduled, _ in _rows(postgres_b, tenant.id)
                ),
                60,
                "fires in cell b past the move",
            )
            submitter.stop.set()
            submitter.thread.join(90)
            assert not submitter.errors, submitter.errors
            client.pause_schedule(schedule_id)  # through the edge: in cell b
            # the same key, now against cell b
            assert [job.id for job in client.list_jobs().items] == [job_id]
            assert client.start_run(job_id).id in {row[0] for row in _rows(postgres_b, tenant.id)}
            # its runs from before the move, read by id through the edge (from cell a)
            for run_id in before:
                assert client.get_run(run_id).id == run_id
            # what the tenant had queued or running in a finished there
            wait_until(
                lambda: all(
                    RunState(state).is_terminal for _, _, state in _rows(postgres_a, tenant.id)
                ),
                120,
                "cell a's runs of the tenant ended",
            )
            in_a, in_b = _rows(postgres_a, tenant.id), _rows(postgres_b, tenant.id)
    assert {state for _, _, state in in_a} == {RunState.SUCCEEDED}
    ids = [run_id for run_id, _, _ in in_a + in_b]
    assert len(ids) == len(set(ids))
    for run_id in [*before, *submitter.acknowledged]:
        assert ids.count(run_id) == 1, f"acknowledged run {run_id} is not there once"
    assert len(submitter.acknowledged) >= 5
    instants = sorted(scheduled for _, scheduled, _ in in_a + in_b if scheduled)
    assert len(instants) == len(set(instants)), "a fire's instant made a run in each cell"
    expected = [instants[0] + timedelta(seconds=n) for n in range(len(instants))]
    assert instants == expected, "a fire's instant was missed during the move"
    last_in_a = max(scheduled for _, scheduled, _ in in_a if scheduled)
    first_in_b = min(scheduled for _, scheduled, _ in in_b if scheduled)
    assert first_in_b == last_in_a + timedelta(seconds=1)
