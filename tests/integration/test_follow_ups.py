"""The worklist a unit of work's applies leave is the use case's to drain: the store's unit
of work refuses to commit while any is pending (a forgotten drain fails loudly), and the use
cases' (``app.work``) drains it before it commits."""

from __future__ import annotations

import pytest

from herder.app.work import unit_of_work
from herder.store.store import Store
from herder.store.work import FollowUpsPending


def test_a_store_unit_of_work_refuses_to_commit_with_follow_ups_pending(store: Store) -> None:
    refused = pytest.raises(FollowUpsPending, match=r"workflow runs \['wfrun_gone'\]")
    with refused, store.work() as work:
        work.follow(workflow_run="wfrun_gone")


def test_a_use_cases_unit_of_work_drains_before_it_commits(store: Store) -> None:
    with unit_of_work(store) as work:
        work.follow(workflow_run="wfrun_gone", backfill="bkf_gone")  # gone: nothing to move
    assert not work.pending
