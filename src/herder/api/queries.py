"""Query parameters the routers share, each bounded in one place."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

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
