"""The ``created_by`` filter the listings of jobs, schedules, workflows and runs share:
``me`` (the caller's actor) or an actor (``domain.actors``), anything else a 422 naming
``created_by``. Another tenant's actor matches nothing: every listing is the caller's
tenant's."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query

from herder.api.auth import Caller
from herder.domain.actors import creator_wanted


def _creator(
    caller: Caller,
    created_by: Annotated[
        str | None,
        Query(
            description=(
                "only what this actor made: `me` (the caller), or an actor such as "
                "`user:key_01…` or `schedule:sch_01…`"
            ),
        ),
    ] = None,
) -> str | None:
    return None if created_by is None else creator_wanted(created_by, caller.actor)


CreatedBy = Annotated[str | None, Depends(_creator)]
"""The creator a listing keeps, resolved (``me`` is the caller's actor), or None."""
