"""Two claims of one worker at once (a claim sent again beside the first, whose answer was
slow) hand each placed attempt over once: the second to mark it handed over wins nothing,
so no attempt is started twice by one worker on the server's word."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from herder.app.claims import claim
from herder.domain.models import Assignment
from herder.store import workers as worker_store
from herder.store.handover import deliverable
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.test_placement import register


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
    raced = threading.Event()

    def the_other_claim_meanwhile(*arguments: Any) -> Any:
        """The first claim has read the attempt as not handed over: the other claims it
        whole, commit included, before the first marks it."""
        if not raced.is_set():
            raced.set()
            racing = threading.Thread(target=lambda: other.append(claim(api.store, worker, 10)))
            racing.start()
            racing.join(30)
        return deliverable(*arguments)

    monkeypatch.setattr(worker_store, "deliverable", the_other_claim_meanwhile)
    first = claim(api.store, worker, 10)
    (second,) = other
    assert len(first) + len(second) == 1, (first, second)
