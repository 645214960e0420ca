"""/v1/forecast: what the schedules foretell, minute by minute (docs/autoscaling.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from herder.api.auth import Caller, StoreDep
from herder.app import forecast
from herder.domain.forecast import MAX_MINUTES, Forecast

router = APIRouter(tags=["pools"])


@router.get("/v1/forecast")
def get_forecast(
    caller: Caller,
    store: StoreDep,
    pool: Annotated[
        str | None,
        Query(max_length=64, description="one pool's demand (a pool your tenant may use)"),
    ] = None,
    minutes: Annotated[int, Query(ge=1, le=MAX_MINUTES, description="how far ahead")] = 60,
) -> Forecast:
    """The demand the schedules foretell, a minute at a time from now: runs starting, and
    the cpu, memory, GPUs and runs busy at each minute's peak, from each job's recent run
    times. Your tenant's schedules (a system admin's: every tenant's); a pool your tenant may
    not use is 404. Schedules of workflows are not counted yet."""
    return forecast.read_forecast(store, caller, pool, minutes)
