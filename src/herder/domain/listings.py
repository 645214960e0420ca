"""What a caller asks of a listing, as one value built at the edge (a router's query string,
the client's keywords) and carried whole to the store's reader."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from herder.domain.states import RunState


@dataclass(frozen=True)
class PageRequest:
    """One page of a newest-first listing: up to ``limit`` items below ``cursor`` (as a
    previous page returned it; none or empty: the first page), only those whose id starts
    with ``id_prefix`` when given."""

    limit: int = 100
    cursor: str | None = None
    id_prefix: str | None = None


@dataclass(frozen=True)
class RunQuery:
    """The runs a listing asks for: every filter is optional, ``states`` any of them, the
    window ``since`` (inclusive) to ``until`` (exclusive) by creation time."""

    job_id: str | None = None
    schedule_id: str | None = None
    states: Sequence[RunState] = ()
    since: datetime | None = None
    until: datetime | None = None
    page: PageRequest = PageRequest()
    created_by: str | None = None  # an actor (``domain.actors``): the runs it made
