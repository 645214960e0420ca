"""Two claims of one worker at once (a claim sent again beside the first, whose answer was
slow) hand each placed attempt over once: the second to mark it handed over wins nothing,
so no attempt is started twice by one worker on the server's word.

On PostgreSQL a claim reads and marks in one statement, so the second claim's mark waits on
the first's row lock, then finds the attempt marked; on SQLite one writer does one claim at
a time."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import text

from herder.app.claims import claim
from herder.domain.models import Assignment
from herder.store import workers as worker_store
from herder.store.handover import deliverable
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.test_placement import register

WAITING_ON_A_LOCK = text(
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


def a_claim_waits(api: Api) -> bool:
    with api.store.database.read() as connection:
        return bool(connection.execute(WAITING_ON_A_LOCK).scalar())


def test_two_claims_at_once_hand_a_placed_attempt_over_once(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not api.store.database.is_postgres:
        pytest.skip("two write transactions at once are PostgreSQL's (SQLite has one writer)")
    worker = register(api, "w")
    job = api.create_job("job", resources={"cpu": 1})
    api.start_run(job["id"])
    dispatch(api.store)
    other: list[list[Assignment]] = []
    racing = threading.Thread(target=lambda: other.append(claim(api.store, worker, 10)))

    def the_other_claim_meanwhile(*arguments: Any) -> Any:
        """The first claim has marked the attempt, not yet committed: the other claim comes
        and waits on it (or, done first, found nothing to take)."""
        if not racing.is_alive() and not other:
            racing.start()
            deadline = time.monotonic() + 10
            while racing.is_alive() and not a_claim_waits(api) and time.monotonic() < deadline:
                time.sleep(0.01)
        return deliverable(*arguments)

    monkeypatch.setattr(worker_store, "deliverable", the_other_claim_meanwhile)
    first = claim(api.store, worker, 10)
    racing.join(30)
    (second,) = other
    assert len(first) == 1
    assert second == []
