"""Query parameters the routers share, each bounded in one place."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from herder.store.pagination import MAX_PAGE_SIZE

Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)]
"""A page's size: FastAPI refuses one out of bounds with 422 naming ``limit``."""
