"""The page a listing call takes, as keywords, and the query string it becomes: a
``PageRequest`` built once from them (its defaults for those not given)."""

from __future__ import annotations

from typing import Any, TypedDict

from herder.domain.listings import PageRequest


class CursorKeywords(TypedDict, total=False):
    """Up to ``limit`` items (100 unless given) below ``cursor``, as the last page
    returned it (``next_cursor``)."""

    limit: int
    cursor: str | None


class PageKeywords(CursorKeywords, total=False):
    """The same, of the items whose id starts with ``id_prefix`` (``sch_01M82Z``)."""

    id_prefix: str | None


def page_params(page: CursorKeywords) -> dict[str, Any]:
    """The page's query parameters, those not set left out."""
    request = PageRequest(**page)
    params = {"limit": request.limit, "cursor": request.cursor, "id_prefix": request.id_prefix}
    return {key: value for key, value in params.items() if value is not None}
