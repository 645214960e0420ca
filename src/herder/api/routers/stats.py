"""/v1/stats: the overview's numbers — live counts, runs ended per minute by outcome, the
failure rate and resources in use — for the dashboard and `herder top`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from herder.api.auth import Caller, StoreDep
from herder.app import stats
from herder.domain.stats import MAX_MINUTES, Stats

router = APIRouter(prefix="/v1/stats", tags=["stats"])


@router.get("")
def read_stats(
    caller: Caller,
    store: StoreDep,
    minutes: Annotated[int, Query(ge=1, le=MAX_MINUTES)] = 60,
) -> Stats:
    """The caller's tenant over the last ``minutes`` whole minutes (the current one
    included); for the system tenant's admins, the whole fleet with its capacity and
    workers."""
    return stats.overview(store, caller, minutes)
