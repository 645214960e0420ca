"""Query parameters the routers share, each bounded in one place, and the page a listing's
query string asks for, built once here (``Paging``) and carried whole to the store."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query

from herder.domain.listings import PageRequest
from herder.store.pagination import MAX_PAGE_SIZE

Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)]
"""A page's size: FastAPI refuses one out of bounds with 422 naming ``limit``."""

IdPrefix = Annotated[
    str | None,
    Query(
        pattern=r"^[a-z]+_[0-9A-HJKMNP-TV-Z]{1,26}$",
        description="items whose id starts with this, e.g. sch_01M82Z",
    ),
]
"""The start of an id (its kind's prefix and up to its 26 characters), as the CLI finds an
item from the start of its id that a table shows."""

ItemName = Annotated[str | None, Query(max_length=128, description="only the item of this name")]
"""A name to find an item by, as the CLI takes a name wherever it takes an id."""

OtherTenant = Annotated[
    str | None, Query(max_length=40, description="another tenant's (system admins)")
]
"""Whose items a system admin reads: by default, as for everyone, the caller's own tenant's."""


def _page(limit: Limit = 100, cursor: str | None = None, id_prefix: IdPrefix = None) -> PageRequest:
    return PageRequest(limit, cursor, id_prefix)


def _page_by_cursor(limit: Limit = 100, cursor: str | None = None) -> PageRequest:
    return PageRequest(limit, cursor)


Paging = Annotated[PageRequest, Depends(_page)]
"""The page a listing asks for: ``limit``, ``cursor`` (as the last page returned it) and
``id_prefix``."""

CursorPaging = Annotated[PageRequest, Depends(_page_by_cursor)]
"""The page a listing that finds no item by the start of its id asks for: ``limit`` and
``cursor``."""
